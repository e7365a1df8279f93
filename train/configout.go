package train

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"

	"github.com/dgtune/dgtune/config"
)

// FormatChanged renders, as YAML in the file's layout, only the settings of c that differ
// from config.Defaults(): what this run chose, without ~70 lines of defaults. "" when
// nothing differs. (FormatConfig renders all of them; adapter_config.json records all.)
func FormatChanged(c config.Config) string {
	d := config.Defaults()
	out := map[string]any{}
	for _, k := range config.Keys() {
		v := config.Get(c, k)
		if reflect.DeepEqual(v, config.Get(d, k)) {
			continue
		}
		m := out
		parts := splitKey(k)
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	if len(out) == 0 {
		return ""
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		return err.Error() + "\n"
	}
	return string(b)
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
