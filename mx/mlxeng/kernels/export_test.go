package kernels

// Emulation and RunEmulation let the external tests (package kernels_test, which may
// import the engines) build and run CPU emulations.
var (
	Emulation    = emulation
	RunEmulation = runEmulation
)
