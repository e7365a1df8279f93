package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/mx"
)

// File names under adapter_path.
const (
	AdapterFile      = "adapters.safetensors"
	BestAdapterFile  = "best_adapters.safetensors"
	AdapterConfig    = "adapter_config.json"
	StateFile        = "training_state.safetensors"
	StateJSON        = "training_state.json"
	MetricsFile      = "metrics.jsonl"
	FullWeightsFile  = "model.safetensors"
	stateMetadataKey = "dgtune_state"
)

// State is the resumable position of a run. It is stored in the metadata of
// training_state.safetensors, next to the parameters and optimizer moments, so that one
// atomic rename publishes a consistent checkpoint; training_state.json is a readable
// copy.
type State struct {
	Step              int           `json:"step"`
	Position          data.Position `json:"position"`
	Seed              uint64        `json:"seed"`
	LearningRate      float64       `json:"learning_rate"`
	TrainedTokens     int64         `json:"trained_tokens"`
	BestValLoss       *float64      `json:"best_val_loss,omitempty"`
	EvalsSinceBest    int           `json:"evals_since_best"`
	Window            []float64     `json:"window,omitempty"` // losses since the last report
	OptimizerStep     int           `json:"optimizer_step"`
	FineTuneType      string        `json:"fine_tune_type"`
	ParamFingerprints []string      `json:"params"`
	// WorldSize is the number of ranks that trained the last steps (1 alone; 0 in states
	// written before distributed runs existed). Nothing else in the state is per rank.
	WorldSize int `json:"world_size"`
}

// saveState writes params ("param.<name>") and optimizer state ("opt.<key>") with the
// state in the metadata, then the JSON copy.
func saveState(dir string, st State, params, opt map[string]*mx.Array) error {
	arrays := map[string]*mx.Array{}
	for n, a := range params {
		arrays["param."+n] = a
	}
	for n, a := range opt {
		arrays["opt."+n] = a
	}
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := mx.SaveSafetensors(filepath.Join(dir, StateFile), arrays, map[string]string{stateMetadataKey: string(js), "format": "mlx"}); err != nil {
		return fmt.Errorf("save training state: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, StateJSON), append(js, '\n'))
}

// errNoState means there is nothing to resume from.
var errNoState = errors.New("no training state")

// loadState reads what saveState wrote.
func loadState(e mx.Engine, dir string) (State, map[string]*mx.Array, map[string]*mx.Array, error) {
	path := filepath.Join(dir, StateFile)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return State{}, nil, nil, errNoState
	}
	arrays, meta, err := mx.LoadSafetensors(e, path)
	if err != nil {
		return State{}, nil, nil, fmt.Errorf("resume: %w", err)
	}
	var st State
	if err := json.Unmarshal([]byte(meta[stateMetadataKey]), &st); err != nil {
		return State{}, nil, nil, fmt.Errorf("resume: %s: bad state metadata: %w", path, err)
	}
	params, opt := map[string]*mx.Array{}, map[string]*mx.Array{}
	for n, a := range arrays {
		switch {
		case strings.HasPrefix(n, "param."):
			params[strings.TrimPrefix(n, "param.")] = a
		case strings.HasPrefix(n, "opt."):
			opt[strings.TrimPrefix(n, "opt.")] = a
		default:
			return State{}, nil, nil, fmt.Errorf("resume: %s: unexpected tensor %q", path, n)
		}
	}
	return st, params, opt, nil
}
