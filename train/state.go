package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/safetensors"
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
// atomic rename publishes a consistent checkpoint: that file alone is the training state.
// training_state.json is a readable copy written after it; a kill between the two
// renames leaves the copy one checkpoint behind, which resume notices and repairs.
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
	return writeStateJSON(dir, st)
}

func writeStateJSON(dir string, st State) error {
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, StateJSON), append(js, '\n'))
}

// errNoState means there is nothing to resume from.
var errNoState = errors.New("no training state")

// ReadState returns the state of the last complete checkpoint in dir — what --resume
// continues from — reading only the header of training_state.safetensors. It wraps
// fs.ErrNotExist when dir holds no checkpoint.
func ReadState(dir string) (State, error) {
	path := filepath.Join(dir, StateFile)
	f, err := safetensors.Open(path)
	if err != nil {
		return State{}, err
	}
	defer f.Close()
	return parseState(path, f.Metadata())
}

func parseState(path string, meta map[string]string) (State, error) {
	raw, ok := meta[stateMetadataKey]
	if !ok {
		return State{}, fmt.Errorf("%s: no %q metadata: not a dgtune training state", path, stateMetadataKey)
	}
	var st State
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return State{}, fmt.Errorf("%s: bad state metadata: %w", path, err)
	}
	return st, nil
}

// loadState reads what saveState wrote.
func loadState(e mx.Engine, dir string) (State, map[string]*mx.Array, map[string]*mx.Array, error) {
	path := filepath.Join(dir, StateFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return State{}, nil, nil, errNoState
	}
	arrays, meta, err := mx.LoadSafetensors(e, path)
	if err != nil {
		return State{}, nil, nil, fmt.Errorf("resume: %w", err)
	}
	st, err := parseState(path, meta)
	if err != nil {
		return State{}, nil, nil, fmt.Errorf("resume: %w", err)
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

// checkStateCopy compares training_state.json with the state resume read from the
// safetensors file and, when they differ (the run died between the two renames, or the
// copy was edited), rewrites the copy and says so. The safetensors state wins: it is the
// one whose parameters and moments belong together.
func checkStateCopy(dir string, st State) (note string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, StateJSON))
	var cp State
	switch {
	case errors.Is(err, fs.ErrNotExist):
		note = fmt.Sprintf("%s was missing; rewritten from %s (step %d)", StateJSON, StateFile, st.Step)
	case err != nil:
		return "", err
	case json.Unmarshal(b, &cp) != nil:
		note = fmt.Sprintf("%s was unreadable; rewritten from %s (step %d)", StateJSON, StateFile, st.Step)
	case cp.Step != st.Step:
		note = fmt.Sprintf("%s said step %d but %s holds step %d (the run stopped between writing the two); continuing from step %d and rewriting the copy",
			StateJSON, cp.Step, StateFile, st.Step, st.Step)
	default:
		return "", nil
	}
	return note, writeStateJSON(dir, st)
}
