package train

import (
	"context"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/session"
	"github.com/dgtune/dgtune/tokenizer"
)

// nemoConfig is resumeConfig with NeMo AutoModel's objective as `objective: nemo` sets it,
// on canvases of 2 tokens so that every target (a completion, <turn|> and EOS fill: 6
// tokens) has three blocks to choose from.
func nemoConfig(t *testing.T, dir string) config.Config {
	t.Helper()
	cfg := resumeConfig(t, dir)
	preset, ok := config.ObjectivePreset(config.ObjectiveNeMo)
	if !ok {
		t.Fatal("no nemo preset")
	}
	cfg.Objective = config.ObjectiveNeMo
	cfg.TMin, cfg.TMax = preset["t_min"].(float64), preset["t_max"].(float64)
	cfg.LossPositions = preset["loss_positions"].(string)
	cfg.EOSFill = preset["eos_fill"].(bool)
	cfg.SelfConditioning = preset["self_conditioning"].(float64)
	cfg.EncoderLossWeight = preset["encoder_loss_weight"].(float64)
	cfg.LongTargets = preset["long_targets"].(string)
	cfg.MaxCanvas = 2
	return cfg
}

// TestResumeNeMo is TestResumeAfterInterrupt with NeMo's objective: the per-example
// self-conditioning coin and block choice are keyed by (seed, step, micro-batch,
// example) like the noise, so a run interrupted at every step from 1 to 6 and resumed
// reproduces the uninterrupted run's losses and files byte for byte.
func TestResumeNeMo(t *testing.T) {
	dir := t.TempDir()
	cfg := nemoConfig(t, dir)
	cfg.GradAccumulationSteps = 2
	_, want := checkResumeExactLosses(t, cfg, filepath.Join(dir, "resumed"), 5)

	// The run really was NeMo's: its losses differ from the reference objective's on the
	// same data and seed (the same first step would mean the options were ignored).
	ref := resumeConfig(t, filepath.Join(dir, "ref"))
	ref.MaxCanvas = 2
	if _, err := Run(context.Background(), ref, Options{}); err != nil {
		t.Fatal(err)
	}
	if r := lossSeq(readMetrics(t, ref.AdapterPath)); r[1] == want[1] {
		t.Errorf("first step %s under both objectives", r[1])
	}
}

// The training draws of NeMo's objective: over the steps of a run both self-conditioned
// and single-pass examples occur, and every block of a 3-block target is chosen — drawn
// from the keys the loop derives, so resume (above) replays them.
func TestNeMoChoicesKeyed(t *testing.T) {
	dir := t.TempDir()
	cfg := nemoConfig(t, dir)
	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[int]int{}
	selfCond := 0
	const n = 200
	for step := range uint64(n) {
		ch := s.Objective.Choose(mx.Key(s.Engine, session.DeriveSeed(cfg.Seed, seedTrainChoice, step, 0, 0)), 6)
		blocks[ch.Block]++
		if ch.SelfCond {
			selfCond++
		}
	}
	if len(blocks) != 3 || selfCond < n/4 || selfCond > 3*n/4 {
		t.Errorf("over %d draws: blocks %v, self-conditioned %d", n, blocks, selfCond)
	}
	if s.Objective.BlockLen != 2 || s.Objective.SelfCond != 0.5 || s.Objective.EncoderWeight != 1 {
		t.Errorf("session objective %+v", s.Objective)
	}
}

// random_block keeps the whole completion; eos_fill then closes it with <turn|> and
// fills with EOS to whole canvases. truncate (the reference) cuts to max_canvas first.
func TestLongTargetsEncoder(t *testing.T) {
	dir := t.TempDir()
	model := writeTinyModel(t, filepath.Join(dir, "model"), "", nil)
	s, err := session.Open(tinyConfig(model, dir, dir))
	if err != nil {
		t.Fatal(err)
	}
	turn, eos := int32(tokenizer.SyntheticTurnCloseID), int32(tokenizer.SyntheticEOSID)
	completion := "abcdefg" // 7 byte tokens
	ids := s.Tokenizer.Encode(completion)
	if len(ids) != 7 {
		t.Fatalf("%q encodes to %d ids", completion, len(ids))
	}
	cases := []struct {
		long    string
		eosFill bool
		canvas  int
		want    []int32
	}{
		{config.LongTruncate, false, 4, ids[:4]},
		{config.LongTruncate, true, 4, ids[:4]}, // full canvas: no room for <turn|>
		{config.LongTruncate, true, 8, append(slices.Clone(ids), turn)},
		{config.LongTruncate, true, 10, append(slices.Clone(ids), turn, eos, eos)},
		{config.LongRandomBlock, false, 4, ids},
		{config.LongRandomBlock, true, 4, append(slices.Clone(ids), turn)},                                             // 8 = 2 canvases
		{config.LongRandomBlock, true, 3, append(slices.Clone(ids), turn, eos)},                                        // 9 = 3 canvases
		{config.LongRandomBlock, true, 5, append(slices.Clone(ids), turn, eos, eos)},                                   // 10
		{config.LongRandomBlock, true, 16, append(append(slices.Clone(ids), turn), slices.Repeat([]int32{eos}, 8)...)}, // 16
	}
	for _, tc := range cases {
		c := s.Config
		c.LongTargets, c.EOSFill, c.MaxCanvas = tc.long, tc.eosFill, tc.canvas
		enc, err := session.NewEncoder(c, s.Tokenizer, s.Model.Config)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := enc(data.Example{Prompt: []chat.Message{{Role: "user", Content: "q"}}, Completion: completion})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("long_targets %s, eos_fill %v, max_canvas %d: target %v, want %v", tc.long, tc.eosFill, tc.canvas, got, tc.want)
		}
	}
}

// ObjectiveFor maps the config onto the objective: random_block blocks are max_canvas
// long; truncate needs none.
func TestObjectiveForNeMo(t *testing.T) {
	dir := t.TempDir()
	cfg := nemoConfig(t, dir)
	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := objective.NeMo(2)
	if s.Objective != want {
		t.Errorf("objective %+v, want %+v", s.Objective, want)
	}
	cfg.LongTargets = config.LongTruncate
	o, err := session.ObjectiveFor(cfg, s.Model.Config)
	if err != nil || o.BlockLen != 0 {
		t.Errorf("truncate: %+v, %v", o, err)
	}
	if !strings.Contains(config.Format(cfg), "objective: nemo") {
		t.Errorf("resolved config lacks the objective:\n%s", config.Format(cfg))
	}
}

// grad_checkpoint recomputes every layer of both decoder passes and of the encoder's
// continuation in the backward pass; NeMo's objective must train the same adapter.
func TestGradCheckpointNeMo(t *testing.T) {
	dir := t.TempDir()
	cfg := nemoConfig(t, dir)
	cfg.Iters = 3
	cfg.SaveEvery = 0
	cfg.SelfConditioning = 1 // every example takes the two-pass step
	cfg.AdapterPath = filepath.Join(dir, "plain")
	want, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ck := cfg
	ck.GradCheckpoint = true
	ck.AdapterPath = filepath.Join(dir, "checkpointed")
	got, err := Run(context.Background(), ck, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The checkpointed backward sums in another order; three AdamW steps (which divide by
	// √v, so a tiny gradient's rounding moves its update) carry that into the adapter.
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-4*(1+math.Abs(b)) }
	if !close(got.FinalLoss, want.FinalLoss) || !close(*got.FinalValLoss, *want.FinalValLoss) {
		t.Errorf("checkpointed run: train %v val %v, want %v and %v", got.FinalLoss, *got.FinalValLoss, want.FinalLoss, *want.FinalValLoss)
	}
}

// NeMo's objective on an image prompt: the encoder loss skips the pairs whose next token
// is an image soft token (the encoder reads vision features there), and a run trains.
func TestNeMoOnImages(t *testing.T) {
	dir := t.TempDir()
	model := writeVisionModel(t, filepath.Join(dir, "model"))
	data := filepath.Join(dir, "data")
	writePNG(t, filepath.Join(data, "red.png"), 48, 48, color.NRGBA{R: 220, A: 255})
	writeFile(t, filepath.Join(data, "train.jsonl"), colourRow("red.png", "warm"), colourRow("red.png", "hot!"))
	cfg := nemoConfig(t, filepath.Join(dir, "text")) // NeMo's settings; model and data replaced below
	cfg.Model, cfg.Data, cfg.AdapterPath = model, data, filepath.Join(dir, "adapters")
	cfg.Iters, cfg.StepsPerEval, cfg.SaveEvery, cfg.BatchSize = 2, 0, 0, 1
	cfg.SelfConditioning = 1
	s, err := session.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadData(); err != nil {
		t.Fatal(err)
	}
	pairs, err := s.Pairs(s.Dataset.Train)
	if err != nil {
		t.Fatal(err)
	}
	p := pairs[0]
	img := int32(s.Model.Config.ImageTokenID)
	seq := append(slices.Clone(p.Prompt), p.Target...)
	images := 0
	for _, id := range seq[1:] {
		if id == img {
			images++
		}
	}
	if images == 0 {
		t.Fatalf("the prompt holds no image tokens (id %d): %v, images %d", img, p.Prompt, len(p.Images))
	}
	c := s.Objective.DrawExample(mx.Key(s.Engine, 1), mx.Key(s.Engine, 2), p.Target, s.Model.Config.TextConfig.VocabSize)
	terms := s.Objective.ExampleTerms(s.Model, objective.Example{Prompt: p.Prompt, Target: p.Target, Images: p.Images}, c)
	if want := float64(len(seq) - 1 - images); terms.EncCount != want {
		t.Errorf("encoder pairs %v, want %v (%d pairs, %d predicting an image token)", terms.EncCount, want, len(seq)-1, images)
	}
	if _, err := Run(context.Background(), cfg, Options{}); err != nil {
		t.Fatal(err)
	}
}
