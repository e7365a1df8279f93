package train

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/lossplot"
)

// numberedCheckpoint matches the save_every copies: 0000100_adapters.safetensors, or
// 0000100_model.safetensors for a full fine-tune.
var numberedCheckpoint = regexp.MustCompile(`^[0-9]{7}_(` + regexp.QuoteMeta(AdapterFile) + `|` + regexp.QuoteMeta(FullWeightsFile) + `)$`)

// runFiles lists the files of a training run in dir, sorted: the adapter config, the
// latest, best and numbered weights, the training state, the metrics and their plot (and
// not the lock, which belongs to the run in progress). Other files
// (a full fine-tune's copied config and tokenizer, anything the user keeps there) do not
// count.
func runFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adapter_path: %w", err)
	}
	fixed := []string{AdapterConfig, AdapterFile, BestAdapterFile, FullWeightsFile, StateFile, StateJSON, MetricsFile, lossplot.File}
	var out []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (slices.Contains(fixed, n) || numberedCheckpoint.MatchString(n)) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkFreshStart refuses to start a run over another one in dir, as HF Trainer
// (overwrite_output_dir) and axolotl do: the old run's numbered checkpoints and metrics
// would mix with the new run's, and its training state would be lost to --resume.
func checkFreshStart(dir string) error {
	files, err := runFiles(dir)
	if err != nil || len(files) == 0 {
		return err
	}
	what := strings.Join(files, ", ")
	if st, err := ReadState(dir); err == nil {
		numbered := 0
		for _, f := range files {
			if numberedCheckpoint.MatchString(f) {
				numbered++
			}
		}
		what = fmt.Sprintf("a checkpoint at step %d and %d numbered checkpoint(s)", st.Step, numbered)
	}
	return fmt.Errorf("adapter_path %s already holds a run (%s): pass --resume to continue it, --overwrite to replace it, or choose another --adapter-path", dir, what)
}

// clearRun deletes the files of an earlier run in dir (see runFiles), so that a new run
// starts clean and a later --resume cannot pick up the old state.
func clearRun(dir string) (int, error) {
	files, err := runFiles(dir)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("adapter_path: %w", err)
		}
	}
	return len(files), nil
}
