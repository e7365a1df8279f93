// Package engines registers every array engine compiled into the binary with mx.
// Import it for its side effect: import _ "github.com/dgtune/dgtune/mx/engines".
package engines

import (
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/goeng" // the pure-Go engine, always present
)

// Draws returns the engine to draw a training step's noise on for e: e itself, or, for
// an engine on MLX, the go engine following e's MLX release. Its random numbers are
// MLX's bit for bit (the engines' parity tests hold them exact), and reading them
// needs no evaluation on e's device thread, which is still launching the step before
// when the next one's noise is drawn. A release the go engine cannot follow draws on e.
func Draws(e mx.Engine) mx.Engine {
	lib, v := mx.Library(e.Name())
	if lib != "MLX" {
		return e
	}
	g, err := goeng.NewFollowing(v)
	if err != nil {
		return e
	}
	return g
}
