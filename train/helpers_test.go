package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
)

// writeTinyModel writes a tiny synthetic checkpoint (byte-level tokenizer) under dir.
// edit, if not nil, may change the weights before they are written.
func writeTinyModel(t *testing.T, dir, bits string, edit func(map[string]*mx.Array)) string {
	t.Helper()
	cfg, w := dgtest.Tiny(1, bits).Weights(t, mxtest.Go(t))
	if edit != nil {
		edit(w)
	}
	dgtest.WriteCheckpoint(t, dir, cfg, w)
	return dir
}

// writeFile writes lines (each followed by a newline) to path, creating its directory.
func writeFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fiveExamples are short prompt/completion rows: with the byte tokenizer each
// completion is 3–5 tokens, each prompt about 20.
var fiveExamples = []string{
	`{"prompt": "sky?", "completion": "blue"}`,
	`{"prompt": "grass?", "completion": "green"}`,
	`{"prompt": "snow?", "completion": "white"}`,
	`{"prompt": "coal?", "completion": "black"}`,
	`{"prompt": "sun?", "completion": "gold"}`,
}

// tinyConfig is a run on the tiny model: go engine, rank 4, every step reported, no
// periodic evaluation or numbered checkpoints unless a test asks.
func tinyConfig(model, data, adapters string) config.Config {
	c := config.Defaults()
	c.Model, c.Data, c.AdapterPath = model, data, adapters
	c.Backend = "go"
	c.Seed = 7
	c.LoRAParameters.Rank = 4
	c.Iters = 12
	c.LearningRate = 1e-2
	c.StepsPerReport = 1
	c.StepsPerEval = 0
	c.SaveEvery = 0
	c.MaxCanvas = 8
	c.Eval.Generate = false
	return c
}

// event is one metrics.jsonl line, the fields a resumed run must reproduce.
type event struct {
	Event     string   `json:"event"`
	Iteration int      `json:"iteration"`
	TrainLoss *float64 `json:"train_loss"`
	ValLoss   *float64 `json:"val_loss"`
	LR        *float64 `json:"learning_rate"`
}

func readMetrics(t *testing.T, dir string) []event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// lossSeq renders the events' iteration and losses, bit-exact.
func lossSeq(evs []event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Event + "@" + itoa(ev.Iteration)
		if ev.TrainLoss != nil {
			s += " train=" + ftoa(*ev.TrainLoss)
		}
		if ev.ValLoss != nil {
			s += " val=" + ftoa(*ev.ValLoss)
		}
		out = append(out, s)
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
