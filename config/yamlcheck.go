package config

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Checks of a config file's text, made before viper reads it. viper and mapstructure
// report a value of the wrong type without the file, the line or the value
// ("'shuffle' cannot parse value as 'bool'") and convert some silently (batch_size: 4.7
// becomes 4, seed: -1 wraps to 18446744073709551615); a tab in the indentation comes back
// as yaml's "found character that cannot start any token".

// parseError is a YAML syntax error, with a tab in the indentation named as such.
func parseError(path string, raw []byte, err error) error {
	if line := firstTabIndent(raw); line > 0 {
		return fmt.Errorf("config: %s:%d: a tab in the indentation (YAML indents with spaces only)", path, line)
	}
	return fmt.Errorf("config: %s: %w", path, err)
}

// firstTabIndent returns the first line whose leading whitespace holds a tab, 0 if none.
func firstTabIndent(raw []byte) int {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, len(raw)+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") && strings.TrimSpace(line) != "" {
			return n
		}
	}
	return 0
}

// checkTypes checks the value of every known key in the file (and of the PEFT aliases and
// the mlx-lm optimizer blocks' arguments) against the type the key wants, reporting each
// wrong one with its line, key and value. Unknown keys are checkKeys' to report.
func checkTypes(path string, raw []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return parseError(path, raw, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // empty, or not a mapping: checkKeys says so
	}
	types := map[string]reflect.Type{}
	for _, k := range keys() {
		types[k.path] = k.typ
	}
	for _, a := range peftAliases {
		types[a.alias] = a.typ
		types["lora_parameters."+a.alias] = a.typ
	}
	var problems []string
	var walk func(m *yaml.Node, prefix string)
	walk = func(m *yaml.Node, prefix string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			name, val := m.Content[i].Value, m.Content[i+1]
			p := prefix + name
			if val.Kind == yaml.AliasNode {
				val = val.Alias
			}
			t, ok := types[p]
			if !ok {
				if arg, ok := optimizerBlockArg(p); ok {
					t, ok = types["optimizer_config."+arg]
					if !ok {
						continue // not an argument dgtune has: apply reports it
					}
				} else {
					if val.Kind == yaml.MappingNode {
						walk(val, p+".")
					}
					continue
				}
			}
			if msg := wrongType(t, val); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s: %s", path, val.Line, p, shown(val), msg))
			}
		}
	}
	walk(doc.Content[0], "")
	if len(problems) > 0 {
		return fmt.Errorf("config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// optimizerBlockArg returns ARG for a path optimizer_config.<optimizer>.ARG.
func optimizerBlockArg(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "optimizer_config.")
	if !ok {
		return "", false
	}
	name, arg, ok := strings.Cut(rest, ".")
	if !ok || !isOptimizerName(name) {
		return "", false
	}
	return arg, true
}

// shown is a value as the file wrote it: a scalar verbatim (quoted when it is a string),
// else its kind.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

// wrongType says what t wants when node is not a value of it ("" when it is). Numbers
// and booleans written as strings are accepted as viper reads them (PyYAML, which mlx-lm
// uses, reads 1e-5 as a string); a null leaves the key at its default.
func wrongType(t reflect.Type, n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return ""
	}
	if t.Kind() == reflect.Slice {
		switch n.Kind {
		case yaml.SequenceNode:
			for _, item := range n.Content {
				if item.Kind != yaml.ScalarNode || wrongType(t.Elem(), item) != "" {
					return "want " + typeName(t)
				}
			}
			return ""
		case yaml.ScalarNode: // one comma-separated string, as on the command line
			for _, part := range strings.Split(n.Value, ",") {
				item := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.TrimSpace(part)}
				if wrongType(t.Elem(), item) != "" {
					return "want " + typeName(t)
				}
			}
			return ""
		}
		return "want " + typeName(t)
	}
	if n.Kind != yaml.ScalarNode {
		return "want " + typeName(t)
	}
	s := strings.TrimSpace(n.Value)
	switch t.Kind() {
	case reflect.String:
		return ""
	case reflect.Bool:
		if _, err := strconv.ParseBool(s); err == nil && (n.Tag == "!!bool" || n.Tag == "!!str") {
			return ""
		}
	case reflect.Int, reflect.Uint64:
		f, ok := yamlNumber(n)
		switch {
		case !ok:
		case f != math.Trunc(f):
			return "want a whole number"
		case t.Kind() == reflect.Uint64 && f < 0:
			return "want a whole number ≥ 0"
		case math.Abs(f) > 1<<53 && n.Tag != "!!int":
			return "want a whole number"
		default:
			return ""
		}
	case reflect.Float64:
		if _, ok := yamlNumber(n); ok {
			return ""
		}
	}
	return "want " + typeName(t)
}

// yamlNumber reads a scalar as YAML or viper would: an int (decimal, 0x, 0o), a float,
// or a string holding one.
func yamlNumber(n *yaml.Node) (float64, bool) {
	s := strings.TrimSpace(n.Value)
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return float64(i), true
	}
	if u, err := strconv.ParseUint(s, 0, 64); err == nil {
		return float64(u), true
	}
	if n.Tag == "!!bool" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// typeName names what a key of type t holds, for "want …".
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "a whole number"
	case reflect.Uint64:
		return "a whole number ≥ 0"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.Float64:
			return "a list of numbers"
		case reflect.String:
			return "a list of strings"
		}
	}
	return t.String()
}
