//go:build amd64 && !purego

package par

// pause is the x86 spin-wait hint: it lets a hyperthread sibling run while a helper spins.
//
//go:noescape
func pause()
