package config

import (
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Format renders every setting of c as YAML in the file's layout, keys sorted; a value a
// preset set (c.Presets: recipe nemo, objective nemo) carries that as a comment.
func Format(c Config) string {
	return formatKeys(c, func(string) bool { return true })
}

// FormatChanged renders, as Format does, only the settings of c that differ from
// Defaults(): what this run chose, without ~70 lines of defaults. "" when nothing
// differs.
func FormatChanged(c Config) string {
	d := Defaults()
	return formatKeys(c, func(k string) bool { return !reflect.DeepEqual(Get(c, k), Get(d, k)) })
}

// Nested is c as nested maps in the key layout of the YAML file ("lora_parameters" →
// {"rank": …}), the form adapter_config.json records a run's settings in.
func Nested(c Config) map[string]any {
	out := map[string]any{}
	for _, k := range Keys() {
		m := out
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = Get(c, k)
	}
	return out
}

// formatKeys renders the keys of c that keep selects as YAML, nested as in the file, keys
// sorted, each value a preset set followed by "# <preset>".
func formatKeys(c Config, keep func(string) bool) string {
	root := &yaml.Node{Kind: yaml.MappingNode}
	keys := Keys()
	sort.Strings(keys)
	n := 0
	for _, k := range keys {
		if !keep(k) {
			continue
		}
		var val yaml.Node
		if err := val.Encode(Get(c, k)); err != nil {
			return err.Error() + "\n"
		}
		if by := c.Presets[k]; by != "" {
			// A block sequence would carry its comment onto the line of the next key.
			if val.Kind == yaml.SequenceNode {
				val.Style = yaml.FlowStyle
			}
			val.LineComment = by
		}
		m := root
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			m = child(m, p)
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: parts[len(parts)-1]}, &val)
		n++
	}
	if n == 0 {
		return ""
	}
	b, err := yaml.Marshal(root)
	if err != nil {
		return err.Error() + "\n"
	}
	return string(b)
}

// child returns the mapping under key name of m, adding it when m has none.
func child(m *yaml.Node, name string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == name {
			return m.Content[i+1]
		}
	}
	sub := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, sub)
	return sub
}
