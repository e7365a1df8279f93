package config

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EvalInherits are the training settings eval takes from an adapter's adapter_config.json
// ("training"): those that decide what the adapter was trained to do with an example —
// where the data is, how it is read and tokenized, the canvas, the objective's options.
// Not the seed (eval draws its own corruptions, the same for base and adapter), the
// backend (a property of the machine) or eval.* (eval's own).
var EvalInherits = []string{
	"data", "max_canvas", "max_prompt", "eos_fill",
	"objective", "loss_positions", "weighting", "t_min", "t_max", "long_targets",
	"prompt_feature", "completion_feature", "text_feature", "chat_feature", "skip_bad_rows",
}

// Inherit is a layer of settings under the file: Values by dotted key, read From (a path,
// for messages).
type Inherit struct {
	From   string
	Values map[string]any
}

// Inherited is one inherited key and what became of it.
type Inherited struct {
	Key      string
	Recorded any    // the inherited value
	Value    any    // the resolved value
	By       string // what overrode it ("--max-canvas", "DGTUNE_MAX_CANVAS", the file); "" when taken
}

// InheritReport lists the inherited keys that differ from the defaults and were taken,
// and those the file, environment or flags set to something else.
type InheritReport struct {
	Taken, Overridden []Inherited
}

func (inh Inherit) report(c Config, v *viper.Viper, path string, fs *pflag.FlagSet) InheritReport {
	var r InheritReport
	d := Defaults()
	for _, k := range sortedKeys(inh.Values) {
		got := Get(c, k)
		it := Inherited{Key: k, Recorded: inh.Values[k], Value: got}
		if sameValue(normalise(got), normalise(inh.Values[k])) {
			if !sameValue(normalise(Get(d, k)), normalise(got)) {
				r.Taken = append(r.Taken, it)
			}
			continue
		}
		switch {
		case fs != nil && fs.Lookup(FlagName(k)) != nil && fs.Lookup(FlagName(k)).Changed:
			it.By = "--" + FlagName(k)
		case strings.TrimSpace(os.Getenv(EnvName(k))) != "":
			it.By = EnvName(k)
		case path != "" && v.InConfig(k):
			it.By = path
		default:
			it.By = "objective " + c.Objective // the only other layer above: a preset's value
		}
		r.Overridden = append(r.Overridden, it)
	}
	return r
}

// Lines are the report in words, one line each (none when nothing was inherited).
func (r InheritReport) Lines(from string) []string {
	var out []string
	if len(r.Taken) > 0 {
		parts := make([]string, len(r.Taken))
		for i, it := range r.Taken {
			parts[i] = it.Key + " " + showValue(it.Value)
		}
		out = append(out, fmt.Sprintf("settings the adapter was trained with (%s): %s", from, strings.Join(parts, ", ")))
	}
	if len(r.Overridden) > 0 {
		parts := make([]string, len(r.Overridden))
		for i, it := range r.Overridden {
			parts[i] = fmt.Sprintf("%s %s from %s (trained with %s)", it.Key, showValue(it.Value), it.By, showValue(it.Recorded))
		}
		out = append(out, "overriding the adapter's settings: "+strings.Join(parts, ", "))
	}
	return out
}

// InheritFrom picks the EvalInherits keys out of a recorded training config (the
// "training" object of adapter_config.json).
func InheritFrom(from string, training map[string]any) Inherit {
	inh := Inherit{From: from, Values: map[string]any{}}
	for k, val := range training {
		if slices.Contains(EvalInherits, k) && val != nil {
			inh.Values[k] = val
		}
	}
	return inh
}
