package train

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/tokenizer"
)

// TestFreshStartRefusesExistingRun: train without --resume into an adapter_path that holds
// a run is refused, naming --resume and --overwrite, and nothing in it changes; with
// overwrite the old run's files (its numbered checkpoints too) are gone and the new run's
// outputs equal those of a run in an empty directory.
func TestFreshStartRefusesExistingRun(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 8 // numbered checkpoints at 4 and 8
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	before := readBytes(t, filepath.Join(cfg.AdapterPath, StateFile))
	_, err := Run(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "already holds a run (a checkpoint at step 8 and 2 numbered checkpoint(s))") ||
		!strings.Contains(err.Error(), "--resume") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("second fresh run: %v, want a refusal naming --resume and --overwrite", err)
	}
	if string(readBytes(t, filepath.Join(cfg.AdapterPath, StateFile))) != string(before) {
		t.Error("the refused run changed the training state")
	}
	// With resume, overwrite does not apply: the run is continued (already finished here).
	both := cfg
	both.Resume, both.Overwrite = true, true
	if res, err := Run(context.Background(), both, Options{}); err != nil || !res.AlreadyDone {
		t.Errorf("resume + overwrite: %+v, %v; want the finished run left as it is", res, err)
	}
	if string(readBytes(t, filepath.Join(cfg.AdapterPath, StateFile))) != string(before) {
		t.Error("resume + overwrite changed the training state")
	}

	// Overwrite with a shorter run: no numbered checkpoint of the old run survives.
	ow := cfg
	ow.Overwrite, ow.Iters = true, 3
	var log strings.Builder
	if _, err := Run(context.Background(), ow, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	// adapter config, adapters, best, two numbered, state and its copy, metrics, loss plot.
	if !strings.Contains(log.String(), "deleted 9 file(s) of an earlier run") {
		t.Errorf("log does not say the old run was deleted:\n%s", log.String())
	}
	for _, gone := range []string{"0000004_" + AdapterFile, "0000008_" + AdapterFile} {
		if _, err := os.Stat(filepath.Join(cfg.AdapterPath, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of the old run survived --overwrite (%v)", gone, err)
		}
	}
	clean := ow
	clean.Overwrite, clean.AdapterPath = false, filepath.Join(dir, "clean")
	if _, err := Run(context.Background(), clean, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{AdapterFile, BestAdapterFile, StateFile, MetricsFile} {
		got, want := readBytes(t, filepath.Join(ow.AdapterPath, f)), readBytes(t, filepath.Join(clean.AdapterPath, f))
		if f == MetricsFile {
			got, want = []byte(strings.Join(lossSeq(readMetrics(t, ow.AdapterPath)), "\n")), []byte(strings.Join(lossSeq(readMetrics(t, clean.AdapterPath)), "\n"))
		}
		if string(got) != string(want) {
			t.Errorf("%s after --overwrite differs from a run in an empty directory", f)
		}
	}
	// A directory with other files only is not a run.
	other := cfg
	other.AdapterPath = filepath.Join(dir, "notes")
	writeFile(t, filepath.Join(other.AdapterPath, "README.txt"), "mine")
	other.Iters = 1
	if _, err := Run(context.Background(), other, Options{}); err != nil {
		t.Errorf("a directory without run files: %v", err)
	}
}

// TestFinalLossIsWindowMean: the closing train loss is the mean of the last report window,
// as the last log line and metrics event show, not the last step's loss.
func TestFinalLossIsWindowMean(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters, cfg.StepsPerReport = 6, 3
	res, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var last *float64
	for _, ev := range readMetrics(t, cfg.AdapterPath) {
		if ev.Event == "train" {
			last = ev.TrainLoss
		}
	}
	if last == nil || math.Abs(res.FinalLoss-*last) > 1e-12 {
		t.Errorf("final train loss %v, last reported window mean %v", res.FinalLoss, last)
	}
	// And it is a mean of three steps, not the sixth step alone: a 1-step window differs.
	one := cfg
	one.StepsPerReport, one.AdapterPath = 1, filepath.Join(dir, "every-step")
	single, err := Run(context.Background(), one, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if single.FinalLoss == res.FinalLoss {
		t.Errorf("the 3-step window mean equals the last step's loss %v", single.FinalLoss)
	}
}

// TestEarlyStoppingNeedsValid: patience without a valid split is an error that says so.
func TestEarlyStoppingNeedsValid(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	if err := os.Remove(filepath.Join(cfg.Data, "valid.jsonl")); err != nil {
		t.Fatal(err)
	}
	cfg.EarlyStoppingPatience = 2
	_, err := Run(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "early_stopping_patience 2 needs validation losses") || !strings.Contains(err.Error(), "no valid split") {
		t.Errorf("patience without valid: %v", err)
	}
}

// TestSkipBadRowsCounted: skipped rows are counted in the log with the first reasons.
func TestSkipBadRowsCounted(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	writeFile(t, filepath.Join(cfg.Data, "train.jsonl"), append(fiveExamples[:3:3], `{"prompt": "x"}`, `not json`, `{"prompt": "y", "completion": ""}`)...)
	cfg.SkipBadRows, cfg.Iters = true, 1
	var log strings.Builder
	if _, err := Run(context.Background(), cfg, Options{Log: &log}); err != nil {
		t.Fatal(err)
	}
	want := "data: train.jsonl: skipped 3 of 6 rows (skip_bad_rows): train.jsonl:4:"
	if !strings.Contains(log.String(), want) || !strings.Contains(log.String(), "train.jsonl:5: invalid JSON") {
		t.Errorf("log lacks %q and the reasons:\n%s", want, log.String())
	}
}

// TestScheduleNote: a schedule whose first argument is not learning_rate says which rate
// the run starts from.
func TestScheduleNote(t *testing.T) {
	c := config.Defaults()
	if n := scheduleNote(c); n != "" {
		t.Errorf("constant schedule: note %q", n)
	}
	c.LRSchedule = config.LRSchedule{Name: "cosine_decay", Arguments: []float64{2e-4, 100}}
	if n := scheduleNote(c); !strings.Contains(n, "cosine_decay starts at 0.0002 (lr_schedule.arguments[0]); learning_rate 0.0001 is not used") {
		t.Errorf("note %q", n)
	}
	c.LearningRate = 2e-4
	if n := scheduleNote(c); n != "" {
		t.Errorf("matching learning_rate: note %q", n)
	}
}

// TestVerboseConfig: --verbose prints every setting; adapter_config.json always holds all.
func TestVerboseConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	cfg.Iters = 1
	var log strings.Builder
	if _, err := Run(context.Background(), cfg, Options{Log: &log, Verbose: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "resolved config:\n") || !strings.Contains(log.String(), "optimizer: adamw") {
		t.Errorf("verbose log lacks the defaults:\n%s", log.String())
	}
	var ac struct {
		Training map[string]any `json:"training"`
	}
	if err := json.Unmarshal(readBytes(t, filepath.Join(cfg.AdapterPath, AdapterConfig)), &ac); err != nil {
		t.Fatal(err)
	}
	if ac.Training["optimizer"] != "adamw" || len(ac.Training) < 30 {
		t.Errorf("adapter_config.json training has %d keys, optimizer %v", len(ac.Training), ac.Training["optimizer"])
	}
	if config.FormatChanged(config.Defaults()) != "" {
		t.Errorf("config.FormatChanged(defaults) = %q", config.FormatChanged(config.Defaults()))
	}
}

// TestTokenOutsideVocabulary: a tokenizer from a bigger checkpoint makes ids the model
// cannot embed; tokenization says so in one line naming the file and row, before any
// training (nothing is written).
func TestTokenOutsideVocabulary(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig(t, dir)
	// 600 distinct 4-letter words train about 600 merges, so the late ones get ids far
	// beyond the tiny model's 512.
	var corpus []string
	const letters = "abcdefghijklmnop"
	for i := range 600 {
		w := string([]byte{letters[i%16], letters[(i/16)%16], letters[(i*7)%16], letters[(i*3)%16]})
		corpus = append(corpus, w+" "+w+" "+w)
	}
	tj, err := tokenizer.NewSynthetic(4096, corpus)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Model, "tokenizer.json"), tj, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfg.Data, "train.jsonl"), `{"prompt": "x", "completion": "hfbf"}`, fiveExamples[0])
	_, err = Run(context.Background(), cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "data: train.jsonl:1: example 0: encode: token id") ||
		!strings.Contains(err.Error(), "is outside the model's vocabulary of 512") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line naming train.jsonl:1 and the vocabulary", err)
	}
	if files, _ := runFiles(cfg.AdapterPath); len(files) != 0 {
		t.Errorf("a refused run wrote %v", files)
	}
}
