package mx

import (
	"strings"
	"sync"
)

// libraries records, per engine name, the library an engine runs on and a function that
// reports its version; written only from init functions.
var libraries = struct {
	sync.Mutex
	m map[string]library
}{m: map[string]library{}}

type library struct {
	name    string
	version func() string
}

// RegisterLibrary records that the engine called engine runs on the named library
// ("MLX") and how to ask its version without opening the engine. Engines call it from
// init.
func RegisterLibrary(engine, name string, version func() string) {
	libraries.Lock()
	defer libraries.Unlock()
	libraries.m[engine] = library{name: name, version: version}
}

// Library returns the library an engine runs on and its version ("MLX", "0.32.1"), or
// empty strings for an engine that runs on none (go).
func Library(engine string) (name, version string) {
	libraries.Lock()
	l, ok := libraries.m[engine]
	libraries.Unlock()
	if !ok {
		return "", ""
	}
	return l.name, l.version()
}

// Describe names an engine with its library's version: "go", "mlx on MLX 0.32.1".
func Describe(e Engine) string { return describe(e.Name()) }

func describe(engine string) string {
	if lib, v := Library(engine); lib != "" {
		return engine + " on " + lib + " " + v
	}
	return engine
}

// DescribeEngines lists the engines compiled in with their libraries' versions, for
// --help: "go, mlx on MLX 0.32.1".
func DescribeEngines() string {
	var out []string
	for _, n := range Engines() {
		out = append(out, describe(n))
	}
	return strings.Join(out, ", ")
}
