package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/safetensors"
	"github.com/dgtune/dgtune/optim"
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

// runState is where a run is: the State its checkpoints record, kept in adapter_path.
// How a run starts — fresh, resumed from the checkpoint in adapter_path (rank 0's, on
// every rank), or from resume_adapter_file's weights — is its method set, as is what the
// loop records of each step and evaluation and the writing of the state file.
type runState struct {
	State
	dir     string // adapter_path
	resumed bool   // the run continues the checkpoint in dir
}

// newRunState is the state of a fresh run of cfg that trains params on size ranks.
func newRunState(cfg config.Config, params map[string]*mx.Array, size int) *runState {
	return &runState{dir: cfg.AdapterPath, State: State{
		Seed: cfg.Seed, FineTuneType: cfg.FineTuneType, ParamFingerprints: fingerprints(params), WorldSize: size,
	}}
}

// start sets where the run begins, on every rank alike: from the checkpoint in
// adapter_path with resume (a distributed run resumes when rank 0 does, from rank 0's
// files); else from resume_adapter_file's weights when one is named; else fresh.
func (st *runState) start(cfg config.Config, c *cluster, e mx.Engine, l learner, log io.Writer) error {
	if cfg.Resume || c.size > 1 {
		if err := st.resume(c, e, cfg.Resume, l, log); err != nil {
			return err
		}
	}
	if cfg.ResumeAdapterFile == "" {
		return nil
	}
	if st.resumed {
		fmt.Fprintf(log, "resume_adapter_file: not used: continuing from the training state in %s\n", st.dir)
		return nil
	}
	// Every rank reads the file (it must be there on every machine); agree has checked
	// that the ranks train the same tensors.
	return startFromFile(e, cfg.ResumeAdapterFile, weightsFile(cfg), l.params, log)
}

// resume installs the training state in adapter_path (rank 0's, handed to every rank)
// into l and takes its State, when there is one; asked is the resume key (without it a
// distributed run learns only that rank 0 starts fresh).
func (st *runState) resume(c *cluster, e mx.Engine, asked bool, l learner, log io.Writer) error {
	loaded, params, opt, err := c.loadState(e, st.dir, asked)
	if errors.Is(err, errNoState) {
		if asked {
			fmt.Fprintf(log, "resume: nothing to resume in %s; starting from scratch\n", st.dir)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if loaded.FineTuneType != st.FineTuneType || fmt.Sprint(loaded.ParamFingerprints) != fmt.Sprint(st.ParamFingerprints) {
		return fmt.Errorf("resume: the training state in %s is for different parameters (fine_tune_type %s, %d tensors); change adapter_path or match the config", st.dir, loaded.FineTuneType, len(loaded.ParamFingerprints))
	}
	if loaded.Seed != st.Seed {
		return fmt.Errorf("resume: the training state in %s used seed %d, the config says %d", st.dir, loaded.Seed, st.Seed)
	}
	if err := l.params.SetParams(params); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := l.opt.LoadState(opt, loaded.OptimizerStep); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := l.it.Seek(loaded.Position); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if loaded.WorldSize == 0 {
		loaded.WorldSize = 1 // written before world_size existed
	}
	if loaded.WorldSize != c.size {
		// Nothing in the state belongs to one rank: the position, noise keys and losses are
		// the global batch's, so another split of it continues the same run.
		fmt.Fprintf(log, "resume: the checkpoint was written by %d rank(s), this run has %d: the same steps and examples follow, equal up to float summation order\n", loaded.WorldSize, c.size)
	}
	loaded.WorldSize = c.size
	st.State = loaded
	note, err := checkStateCopy(st.dir, loaded)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if note != "" {
		fmt.Fprintf(log, "resume: %s\n", note)
	}
	st.resumed = true
	fmt.Fprintf(log, "resume: continuing from step %d in %s\n", loaded.Step, st.dir)
	return nil
}

// startFromFile installs the weights of resume_adapter_file (path) as the run's starting
// point, as mlx-lm does: the optimizer, step and data position start fresh. A directory
// means its weights file (adapters.safetensors; model.safetensors for a full fine-tune).
// Tensors are matched by name and shape; every tensor of the file must be a trainable
// array of this run, and trainable arrays the file lacks keep their fresh initialisation
// (said in the log).
func startFromFile(e mx.Engine, path, weights string, t optim.Trainable, log io.Writer) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, weights)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("resume_adapter_file %s: %s", path, fmt.Sprintf(format, args...))
	}
	loaded, _, err := mx.LoadSafetensors(e, path)
	if err != nil {
		return fail("%v", err)
	}
	params := t.Params()
	start := make(map[string]*mx.Array, len(params))
	var problems []string
	for _, n := range slices.Sorted(maps.Keys(loaded)) {
		cur, ok := params[n]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is not trained by this config (lora_parameters.keys, num_layers, fine_tune_type)", n))
		case !slices.Equal(loaded[n].Shape(), cur.Shape()):
			problems = append(problems, fmt.Sprintf("%s: file %v, this run %v (lora_parameters.rank?)", n, loaded[n].Shape(), cur.Shape()))
		case !loaded[n].DType().IsFloat():
			problems = append(problems, fmt.Sprintf("%s: dtype %s, want a float type", n, loaded[n].DType()))
		default:
			start[n] = mx.AsType(loaded[n], cur.DType())
		}
	}
	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}
	if len(start) == 0 {
		return fail("holds no tensors")
	}
	for n, a := range params {
		if _, ok := start[n]; !ok {
			start[n] = a
		}
	}
	mx.Eval(optim.Params(start).Arrays()...)
	if err := t.SetParams(start); err != nil {
		return fail("%v", err)
	}
	fresh := ""
	if k := len(params) - len(loaded); k > 0 {
		fresh = fmt.Sprintf("; %d of the %d trainable arrays are not in it and start fresh", k, len(params))
	}
	fmt.Fprintf(log, "resume_adapter_file: starting from the %d tensors of %s (fresh optimizer, step 0)%s\n", len(loaded), path, fresh)
	return nil
}

// claimDir readies adapter_path for this run's files (rank 0). A fresh run deletes an
// earlier run's: its numbered checkpoints would mix with this run's, and a later --resume
// would pick up its state if this run died before its first checkpoint. metrics.jsonl
// keeps only the events up to the step the run starts from.
func (st *runState) claimDir(log io.Writer) error {
	if !st.resumed {
		n, err := clearRun(st.dir)
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(log, "deleted %d file(s) of an earlier run in %s\n", n, st.dir)
		}
	}
	return truncateMetrics(filepath.Join(st.dir, MetricsFile), st.Step)
}

// record is step n done at learning rate lr on tokens tokens with the given loss, which
// joins the window of losses the next report averages.
func (st *runState) record(n int, lr float64, tokens int64, loss float64) {
	st.Step = n
	st.LearningRate = lr
	st.TrainedTokens += tokens
	st.Window = append(st.Window, loss)
}

// closeWindow returns the mean loss of the steps since the last report and opens a new
// window. The window is part of the State, so that a report after a resume averages the
// same steps as an uninterrupted run.
func (st *runState) closeWindow() float64 {
	mean := 0.0
	for _, l := range st.Window {
		mean += l
	}
	mean /= float64(len(st.Window))
	st.Window = nil
	return mean
}

// observeVal records a val loss: true when it is the best so far (the count of
// evaluations since the best starts over), else one more evaluation without a better one.
func (st *runState) observeVal(loss float64) bool {
	if st.BestValLoss == nil || loss < *st.BestValLoss {
		best := loss
		st.BestValLoss = &best
		st.EvalsSinceBest = 0
		return true
	}
	st.EvalsSinceBest++
	return false
}

// write writes the state file: the State, with l's optimizer step, and l's arrays.
func (st *runState) write(l learner) error {
	st.OptimizerStep = l.opt.Step()
	return saveState(st.dir, st.State, l.params.Params(), l.opt.State())
}

// keptCheckpoints says, for a run stopped by a non-finite loss, what it leaves to go back
// to: the last checkpoint (what --resume continues from), the best adapter and the
// numbered ones, which eval and export take as files.
func (st *runState) keptCheckpoints() string {
	dir := st.dir
	var parts []string
	if saved, err := ReadState(dir); err == nil {
		parts = append(parts, fmt.Sprintf("the last checkpoint (step %d, what --resume continues from) is kept in %s", saved.Step, dir))
	} else {
		parts = append(parts, fmt.Sprintf("no checkpoint was saved in %s yet", dir))
	}
	files, _ := runFiles(dir)
	var earlier []string
	if slices.Contains(files, BestAdapterFile) && st.BestValLoss != nil {
		earlier = append(earlier, fmt.Sprintf("%s (val loss %.4f)", BestAdapterFile, *st.BestValLoss))
	}
	for _, f := range files {
		if numberedCheckpoint.MatchString(f) {
			earlier = append(earlier, f)
		}
	}
	if len(earlier) > 0 {
		parts = append(parts, fmt.Sprintf("if its weights are already bad, earlier ones are %s (eval --adapter %s scores one)",
			strings.Join(earlier, ", "), filepath.Join(dir, strings.Fields(earlier[0])[0])))
	}
	return strings.Join(parts, "; ")
}

// fingerprints name the trainable arrays with their shapes, sorted: what a checkpoint must
// have been written for, and what the ranks must agree on.
func fingerprints(p map[string]*mx.Array) []string {
	var out []string
	for _, n := range sortedNames(p) {
		out = append(out, fmt.Sprintf("%s%v", n, p[n].Shape()))
	}
	return out
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
