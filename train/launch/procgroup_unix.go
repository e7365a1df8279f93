//go:build unix

package launch

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts a rank in a process group of its own: a Ctrl-C on the terminal
// reaches the launcher only, which passes it on exactly once.
func ownProcessGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }
