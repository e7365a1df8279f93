package config

import (
	"strings"

	"github.com/spf13/pflag"
)

// Commands that read the config. Every command reads the whole file and environment (one
// config serves train, eval and export), but each takes as flags — and lists in --help —
// only the keys it uses.
const (
	CommandTrain  = "train"
	CommandEval   = "eval"
	CommandExport = "export"
)

// commandKeys lists the keys (or "section." prefixes) of the commands that do not take
// every key; any other command (train) takes them all.
var commandKeys = map[string][]string{
	// eval loads the model, the data split it scores, tokenizes as training did and
	// scores with the training objective's options.
	CommandEval: {"model", "data", "backend", "compute_dtype", "quantize_on_load", "memory_limit_gb", "seed", "max_canvas", "max_prompt", "eos_fill",
		"objective", "loss_positions", "weighting", "t_min", "t_max", "long_targets",
		"prompt_feature", "completion_feature", "text_feature", "chat_feature", "skip_bad_rows", "eval."},
	// export reads an adapter (adapter_path by default), the base model's config or
	// weights, and seeds the probe input of --fuse.
	CommandExport: {"model", "backend", "seed", "adapter_path"},
}

// Uses reports whether command takes key as a flag.
func Uses(command, key string) bool {
	list, ok := commandKeys[command]
	if !ok {
		return true
	}
	for _, k := range list {
		if k == key || (strings.HasSuffix(k, ".") && strings.HasPrefix(key, k)) {
			return true
		}
	}
	return false
}

// BindFlagsFor defines on fs the flags of the keys command uses, each with its default
// and help (see BindFlags).
func BindFlagsFor(fs *pflag.FlagSet, command string) {
	all := pflag.NewFlagSet(command, pflag.ContinueOnError)
	BindFlags(all)
	all.VisitAll(func(f *pflag.Flag) {
		key := strings.ReplaceAll(f.Name, "-", "_")
		for _, a := range peftAliases { // a PEFT name is a flag where its key is
			if a.alias == key {
				key = a.key
			}
		}
		if Uses(command, key) {
			fs.AddFlag(f)
		}
	})
}
