//go:build !amd64

package par

// pause does nothing where there is no spin-wait hint.
func pause() {}
