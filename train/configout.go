package train

import (
	"fmt"
	"reflect"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/dgtune/dgtune/config"
)

// FormatChanged renders, as YAML in the file's layout, only the settings of c that differ
// from config.Defaults(): what this run chose, without ~70 lines of defaults. A value a
// preset set (c.Presets: recipe nemo, objective nemo) carries that as a comment. "" when
// nothing differs. (FormatConfig renders all of them; adapter_config.json records all.)
func FormatChanged(c config.Config) string {
	d := config.Defaults()
	return formatKeys(c, func(k string) bool { return !reflect.DeepEqual(config.Get(c, k), config.Get(d, k)) })
}

// formatKeys renders the keys of c that keep selects as YAML, nested as in the file, keys
// sorted, each value a preset set followed by "# <preset>".
func formatKeys(c config.Config, keep func(string) bool) string {
	root := &yaml.Node{Kind: yaml.MappingNode}
	keys := config.Keys()
	sort.Strings(keys)
	n := 0
	for _, k := range keys {
		if !keep(k) {
			continue
		}
		var val yaml.Node
		if err := val.Encode(config.Get(c, k)); err != nil {
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
		parts := splitKey(k)
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

// scheduleNote says which learning rate a run starts from when an lr_schedule gives its
// own initial value (mlx-lm's rule: the schedule's first argument, not learning_rate), so
// that a learning_rate which no longer applies is not silently ignored. "" when the
// schedule starts at learning_rate.
func scheduleNote(c config.Config) string {
	s := c.LRSchedule
	if len(s.Arguments) == 0 || s.Arguments[0] == c.LearningRate {
		return ""
	}
	return fmt.Sprintf("note: lr_schedule %s starts at %g (lr_schedule.arguments[0]); learning_rate %g is not used",
		s.Name, s.Arguments[0], c.LearningRate)
}
