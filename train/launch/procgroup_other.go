//go:build !unix

package launch

import "os/exec"

// ownProcessGroup does nothing where there are no process groups (MLX, and so a rank,
// does not run there anyway).
func ownProcessGroup(*exec.Cmd) {}
