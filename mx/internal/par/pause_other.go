//go:build !amd64 || purego

package par

// pause does nothing where there is no spin-wait hint (or no assembly: purego).
func pause() {}
