// Package engines registers every array engine compiled into the binary with mx.
// Import it for its side effect: import _ "github.com/dgtune/dgtune/mx/engines".
package engines

import _ "github.com/dgtune/dgtune/mx/goeng" // the pure-Go engine, always present
