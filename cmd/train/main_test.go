package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/internal/cli"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/model/diffusiongemma/dgtest"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/train"
)

// writeTinyModel writes a tiny synthetic checkpoint with a byte-level tokenizer; nan
// makes its final norm weight NaN, so every loss is NaN.
func writeTinyModel(t *testing.T, dir string, nan bool) string {
	t.Helper()
	e := mxtest.Go(t)
	cfg, w := dgtest.Tiny(1, dg.BitsNone).Weights(t, e)
	if nan {
		name := dg.DecoderPrefix + ".norm.weight"
		v := w[name].Float32s()
		for i := range v {
			v[i] = float32(math.NaN())
		}
		w[name] = mx.FromFloat32(e, v, w[name].Shape()...)
	}
	dgtest.WriteCheckpoint(t, dir, cfg, w)
	return dir
}

// retypedModel writes a tiny checkpoint whose config.json claims another model_type.
func retypedModel(t *testing.T, dir, modelType string) string {
	t.Helper()
	writeTinyModel(t, dir, false)
	path := filepath.Join(dir, "config.json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &doc); err != nil {
		t.Fatal(err)
	}
	doc["model_type"] = modelType
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
	return dir
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const trainRows = `{"prompt": "sky?", "completion": "blue"}
{"prompt": "grass?", "completion": "green"}
{"prompt": "snow?", "completion": "white"}
`

// fixture is a tiny model, a data directory and the config of a short run on them.
type fixture struct {
	dir, model, data, adapters string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{dir: dir, model: writeTinyModel(t, filepath.Join(dir, "model"), false),
		data: filepath.Join(dir, "data"), adapters: filepath.Join(dir, "adapters")}
	writeFile(t, filepath.Join(f.data, "train.jsonl"), trainRows)
	writeFile(t, filepath.Join(f.data, "valid.jsonl"), trainRows)
	return f
}

// config writes a YAML config for the fixture followed by extra lines.
func (f fixture) config(t *testing.T, extra string) string {
	t.Helper()
	return writeFile(t, filepath.Join(f.dir, "cfg.yaml"), "model: "+f.model+"\ndata: "+f.data+"\nadapter_path: "+f.adapters+
		"\nbackend: go\nseed: 3\niters: 50\nmax_canvas: 8\nsteps_per_report: 1\nsteps_per_eval: 0\nsave_every: 0\n"+
		"lora_parameters:\n  rank: 2\n"+extra)
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(newCommand(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTrainCommand(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	jsonOut := filepath.Join(f.dir, "result.json")
	code, stdout, stderr := runMain("--config", cfg, "--iters", "3", "--json", jsonOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	summary := regexp.MustCompile(`^trained 3 steps in [0-9.]+m?s: final train loss [0-9.]+ \(mean since the last report\), val loss [0-9.]+ \(best [0-9.]+ at step ([0-3])\); saved to (.+); loss plot (.+)\n$`)
	m := summary.FindStringSubmatch(stdout)
	if m == nil || m[2] != f.adapters || m[3] != filepath.Join(f.adapters, "loss.png") {
		t.Fatalf("stdout %q, want %s", stdout, summary)
	}
	// The best step is the val event of lowest loss in metrics.jsonl (the first of equal ones).
	bestStep, bestLoss := -1, math.Inf(1)
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(f.adapters, train.MetricsFile))), "\n") {
		var ev struct {
			Event     string  `json:"event"`
			Iteration int     `json:"iteration"`
			ValLoss   float64 `json:"val_loss"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == "val" && ev.ValLoss < bestLoss {
			bestStep, bestLoss = ev.Iteration, ev.ValLoss
		}
	}
	if m[1] != strconv.Itoa(bestStep) {
		t.Errorf("best at step %s, but metrics.jsonl's lowest val loss %v is at step %d", m[1], bestLoss, bestStep)
	}
	checkPNG(t, m[3])
	// Not a terminal: plain lines, one per report, after the resolved config.
	for _, want := range []string{"resolved config (settings that differ from the defaults", "iters: 3", "trainable parameters:", "iter 1/3  loss ", "iter 3/3  loss ", "iter 0: val loss", "iter 3: val loss", "data: train.jsonl: 3 rows; prompt tokens p50 ", "data: valid.jsonl: 3 rows;", "memory: the largest step (train.jsonl:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	var res train.Result
	if err := json.Unmarshal([]byte(readFile(t, jsonOut)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 || res.AdapterPath != f.adapters || res.FinalValLoss == nil {
		t.Errorf("json result %+v", res)
	}
	if res.BestValStep == nil || *res.BestValStep != bestStep || res.ElapsedSeconds <= 0 || res.Plot != m[3] || res.DataCheck == nil || len(res.DataCheck.Splits) != 2 {
		t.Errorf("json result: best step %v, elapsed %v, plot %q, data check %+v", res.BestValStep, res.ElapsedSeconds, res.Plot, res.DataCheck)
	}
	for _, name := range []string{train.AdapterConfig, train.AdapterFile, train.BestAdapterFile, train.StateFile, train.StateJSON, train.MetricsFile} {
		if _, err := os.Stat(filepath.Join(f.adapters, name)); err != nil {
			t.Errorf("missing %s: %v", name, err)
		}
	}
}

// TestPrecedence: flag > DGTUNE_ environment > file > default.
func TestPrecedence(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	t.Setenv("DGTUNE_ITERS", "2")
	if code, stdout, stderr := runMain("--config", cfg); code != 0 || !strings.HasPrefix(stdout, "trained 2 steps") {
		t.Errorf("env over file: exit %d, %q %s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain("--config", cfg, "--iters", "1", "--overwrite"); code != 0 || !strings.HasPrefix(stdout, "trained 1 steps") {
		t.Errorf("flag over env: exit %d, %q %s", code, stdout, stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBadInput: every bad input exits 1 with one "train: ..." line naming the problem,
// never a panic.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	emptyData := filepath.Join(f.dir, "empty")
	writeFile(t, filepath.Join(emptyData, "train.jsonl"), "")
	badData := filepath.Join(f.dir, "bad")
	writeFile(t, filepath.Join(badData, "train.jsonl"), trainRows[:strings.Index(trainRows, "\n")+1]+"\n"+`{"prompt": "x", "completion": }`+"\n")
	nanModel := writeTinyModel(t, filepath.Join(f.dir, "nan"), true)
	gemma4 := retypedModel(t, filepath.Join(f.dir, "gemma4"), "gemma4")
	llama := retypedModel(t, filepath.Join(f.dir, "llama"), "llama")
	cases := []struct {
		name  string
		extra string   // appended to the config file
		args  []string // after --config
		want  string
	}{
		{"unknown key", "learnin_rate: 0.001\n", nil, `unknown key "learnin_rate" (did you mean "learning_rate"?)`},
		{"unknown nested key", "optimizer_config:\n  wieght_decay: 0.1\n", nil, `did you mean "optimizer_config.weight_decay"`},
		{"wrong type", "batch_size: many\n", nil, "batch_size"},
		{"list for a number", "learning_rate: [1, 2]\n", nil, "learning_rate"},
		{"section not a mapping", "eval: 3\n", nil, `"eval" must be a mapping`},
		{"yaml syntax", "seed: [1\n", nil, "cfg.yaml"},
		{"bad choice", "optimizer: lion\n", nil, `optimizer "lion"`},
		{"bad flag value", "", []string{"--iters", "abc"}, `invalid argument "abc"`},
		{"unknown flag", "", []string{"--itres", "3"}, "unknown flag: --itres (did you mean --iters?)"},
		{"flag with underscores", "", []string{"--learning_rate", "3"}, "unknown flag: --learning_rate (did you mean --learning-rate?)"},
		{"positional argument", "", []string{"extra"}, "unknown command"},
		{"missing data dir", "", []string{"--data", filepath.Join(f.dir, "nope")}, "nope"},
		{"empty train split", "", []string{"--data", emptyData}, "train.jsonl has no examples"},
		{"malformed jsonl line", "", []string{"--data", badData}, "train.jsonl:3: invalid JSON"},
		{"missing model", "", []string{"--model", filepath.Join(f.dir, "nomodel")}, "nomodel"},
		{"non-finite loss", "", []string{"--model", nanModel, "--iters", "2"}, "non-finite loss"},
		{"gemma4 checkpoint", "", []string{"--model", gemma4}, `model_type "gemma4" is the autoregressive Gemma 4, not DiffusionGemma`},
		{"llama checkpoint", "", []string{"--model", llama}, `model_type "llama" is not DiffusionGemma`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.config(t, tc.extra)
			code, stdout, stderr := runMain(append([]string{"--config", cfg, "--adapter-path", filepath.Join(f.dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))}, tc.args...)...)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
			}
			if !strings.HasPrefix(last, "train: ") || !strings.Contains(last, tc.want) {
				t.Errorf("last stderr line %q, want \"train: ...%s...\"", last, tc.want)
			}
			t.Log(last)
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "goroutine") {
				t.Errorf("panic:\n%s", stderr)
			}
		})
	}
	t.Run("missing config file", func(t *testing.T) {
		code, _, stderr := runMain("--config", filepath.Join(f.dir, "none.yaml"))
		if code != 1 || !strings.Contains(stderr, "none.yaml") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}

// TestBadEnvironment: a mistyped DGTUNE_ variable and a bad value are errors naming the
// variable, before anything is loaded.
func TestBadEnvironment(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	for env, want := range map[string]string{
		"DGTUNE_LERNING_RATE": "environment variable DGTUNE_LERNING_RATE is not a setting (did you mean DGTUNE_LEARNING_RATE?)",
		"DGTUNE_BATCH_SIZE":   `DGTUNE_BATCH_SIZE="two": batch_size wants a whole number`,
	} {
		t.Run(env, func(t *testing.T) {
			value := "1e-3"
			if env == "DGTUNE_BATCH_SIZE" {
				value = "two"
			}
			t.Setenv(env, value)
			code, stdout, stderr := runMain("--config", cfg)
			if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "train: ") || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one line with %q", code, stdout, stderr, want)
			}
		})
	}
}

// TestHelp: --help lists every config key as a flag with its default, the schedules by
// name (step_decay too) and what lr_schedule.arguments[0] means.
func TestHelp(t *testing.T) {
	code, stdout, _ := runMain("--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--lr-schedule.name", "step_decay", "initial rate first (it replaces learning_rate)",
		"--overwrite", "--resume", "--verbose", "--eval.noise-levels", `(default "adamw")`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, k := range config.Keys() {
		if n := "--" + config.FlagName(k); !strings.Contains(stdout, n+" ") && !strings.Contains(stdout, n+"[=true|false]") {
			t.Errorf("--help lacks --%s", config.FlagName(k))
		}
	}
}

// TestVerboseFlag: the resolved config shows the defaults only with --verbose.
func TestVerboseFlag(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(t, "")
	_, _, quiet := runMain("--config", cfg, "--iters", "1")
	_, _, loud := runMain("--config", cfg, "--iters", "1", "--overwrite", "--verbose")
	if strings.Contains(quiet, "optimizer: adamw") || !strings.Contains(loud, "optimizer: adamw") {
		t.Errorf("default optimizer shown without --verbose (%v) or missing with it (%v)", strings.Contains(quiet, "optimizer: adamw"), strings.Contains(loud, "optimizer: adamw"))
	}
}

// writeDeepTinyModel writes the tiny geometry with n layers (mlx-lm's example adapts the
// last 16).
func writeDeepTinyModel(t *testing.T, dir string, n int) string {
	t.Helper()
	deep := func(c *dg.Config) {
		c.TextConfig.NumHiddenLayers = n
		c.TextConfig.LayerTypes = dg.DefaultLayerTypes(n)
	}
	dgtest.Spec{Preset: dg.PresetTiny, Seed: 1, Bits: dg.BitsNone, Edit: deep}.Checkpoint(t, mxtest.Go(t), dir)
	return dir
}

// mlxlmExample is mlx-lm's example config (config/testdata/mlx-lm) with model, data,
// iters and adapter_path replaced, and nothing else.
func mlxlmExample(t *testing.T, model, data, adapters string, iters int) string {
	t.Helper()
	s := readFile(t, "../../config/testdata/mlx-lm/lora_config.yaml")
	for key, v := range map[string]string{"model": strconv.Quote(model), "data": strconv.Quote(data),
		"iters": strconv.Itoa(iters), "adapter_path": strconv.Quote(adapters)} {
		re := regexp.MustCompile(`(?m)^` + key + `: .*$`)
		if len(re.FindAllString(s, -1)) != 1 {
			t.Fatalf("the example has no single %s line", key)
		}
		s = re.ReplaceAllLiteralString(s, key+": "+v)
	}
	return s
}

// mlxlmData writes a data directory for mlx-lm's example (batch_size 4): 9 train, 3
// valid and 3 test rows.
func mlxlmData(t *testing.T, dir string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, "train.jsonl"), trainRows+trainRows+trainRows)
	writeFile(t, filepath.Join(dir, "valid.jsonl"), trainRows)
	writeFile(t, filepath.Join(dir, "test.jsonl"), trainRows)
	return dir
}

// mlx-lm's example config, with only model, data, iters and adapter_path changed,
// trains: every other key (train, test, test_batches, resume_adapter_file: null,
// max_seq_length, num_layers 16, scale 20, the q/v keys, ...) is taken with mlx-lm's
// meaning.
func TestMLXLMExampleTrains(t *testing.T) {
	dir := t.TempDir()
	model := writeDeepTinyModel(t, filepath.Join(dir, "model"), 16)
	data := mlxlmData(t, filepath.Join(dir, "data"))
	adapters := filepath.Join(dir, "adapters")
	cfg := writeFile(t, filepath.Join(dir, "lora_config.yaml"), mlxlmExample(t, model, data, adapters, 2))
	code, stdout, stderr := runMain("--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "trained 2 steps in ") || strings.Contains(stdout, "Test loss") {
		t.Errorf("stdout %q: want 2 steps and no test (test: false)", stdout)
	}
	// 16 layers of the tiny geometry, pattern [sliding×5, full]: full layers 5, 11 and 15
	// have no v_proj. Rank 8: q_proj 8·(64+64) on a sliding layer, 8·(64+128) on a full
	// one; v_proj 8·(64+32). 13·1024 + 3·1536 + 13·768 = 27904.
	for _, want := range []string{
		"config: max_seq_length 2048: prompts keep their last 1792 tokens (max_prompt), completions their first 256 (max_canvas)",
		"num_layers: 16", "scale: 20", "max_prompt: 1792", "val_batches: 25", "learning_rate: 1e-05",
		"9 train / 3 valid examples; trainable parameters: 27904 ",
		"iter 0: val loss", "iter 2/2  loss ", "iter 2: val loss",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	var ac struct {
		LoRA struct {
			Keys  []string `json:"keys"`
			Scale float64  `json:"scale"`
		} `json:"lora_parameters"`
		NumLayers int `json:"num_layers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(adapters, train.AdapterConfig))), &ac); err != nil {
		t.Fatal(err)
	}
	if ac.NumLayers != 16 || ac.LoRA.Scale != 20 || strings.Join(ac.LoRA.Keys, ",") != "self_attn.q_proj,self_attn.v_proj" {
		t.Errorf("adapter_config.json: %+v", ac)
	}
}

// The same file with lr_schedule, optimizer_config.adamw.weight_decay and mask_prompt:
// true switched on trains, and the resolved config (printed, and in adapter_config.json)
// and the learning rates of the run show them applied.
func TestMLXLMExampleWithOptions(t *testing.T) {
	dir := t.TempDir()
	model := writeDeepTinyModel(t, filepath.Join(dir, "model"), 16)
	data := mlxlmData(t, filepath.Join(dir, "data"))
	adapters := filepath.Join(dir, "adapters")
	s := mlxlmExample(t, model, data, adapters, 4)
	// Uncomment the example's own lines (the schedule's arguments fitted to 4 steps).
	edits := []struct{ old, new string }{
		{"# optimizer_config:\n#   adamw:\n#     betas: [0.9, 0.98]\n#     eps: 1e-6\n#     weight_decay: 0.05\n",
			"optimizer_config:\n  adamw:\n    weight_decay: 0.05\n"},
		{"#lr_schedule:\n#  name: cosine_decay\n#  warmup: 100 # 0 for no warmup\n#  warmup_init: 1e-7 # 0 if not specified\n" +
			"#  arguments: [1e-5, 1000, 1e-7] # passed to scheduler\n",
			"lr_schedule:\n  name: cosine_decay\n  warmup: 1\n  warmup_init: 1e-7\n  arguments: [1e-5, 4, 1e-7]\n"},
	}
	for _, ed := range edits {
		if !strings.Contains(s, ed.old) {
			t.Fatalf("the example no longer reads %q", ed.old)
		}
		s = strings.Replace(s, ed.old, ed.new, 1)
	}
	s += "\nmask_prompt: true\n"
	cfg := writeFile(t, filepath.Join(dir, "lora_config.yaml"), s)
	// --verbose: the resolved config in full (mask_prompt true is also the default).
	code, stdout, stderr := runMain("--config", cfg, "--verbose")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "trained 4 steps") {
		t.Errorf("stdout %q", stdout)
	}
	resolved := stderr[strings.Index(stderr, "resolved config:"):]
	for _, want := range []string{"mask_prompt: true", "    weight_decay: 0.05\n", "    name: cosine_decay\n", "    warmup: 1\n",
		"    warmup_init: 1e-07\n", "    arguments:\n        - 1e-05\n        - 4\n        - 1e-07\n"} {
		if !strings.Contains(resolved, want) {
			t.Errorf("resolved config lacks %q:\n%s", want, resolved)
		}
	}
	var ac struct {
		Training struct {
			MaskPrompt      bool `json:"mask_prompt"`
			OptimizerConfig struct {
				WeightDecay float64 `json:"weight_decay"`
			} `json:"optimizer_config"`
			LRSchedule struct {
				Name string `json:"name"`
			} `json:"lr_schedule"`
		} `json:"training"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(adapters, train.AdapterConfig))), &ac); err != nil {
		t.Fatal(err)
	}
	if tr := ac.Training; !tr.MaskPrompt || tr.OptimizerConfig.WeightDecay != 0.05 || tr.LRSchedule.Name != "cosine_decay" {
		t.Errorf("adapter_config.json training: %+v", tr)
	}
	// mlx-lm's build_schedule: linear warmup 1e-7 → 1e-5 over 1 step, joined at step 2 with
	// cosine_decay(1e-5, 4, 1e-7). The 4th update (optimizer step 3) is the cosine's step 1.
	want := 1e-7 + (1e-5-1e-7)*0.5*(1+math.Cos(math.Pi/4))
	var st train.State
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(adapters, train.StateJSON))), &st); err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.LearningRate-want) > 1e-12 {
		t.Errorf("learning rate of step 4 = %g, want cosine_decay's %g", st.LearningRate, want)
	}
	if !strings.Contains(stderr, "iter 4/4  loss ") {
		t.Errorf("no report of step 4:\n%s", stderr)
	}
}

// --test prints mlx-lm's test line after training; --train=false --test prints only it;
// mlx-lm keys that do nothing here get one line each on stderr.
func TestMLXLMTestAndNotes(t *testing.T) {
	f := newFixture(t)
	writeFile(t, filepath.Join(f.data, "test.jsonl"), trainRows)
	cfg := f.config(t, "report_to: wandb\nproject_name: mine\ntrust_remote_code: true\n")
	jsonOut := filepath.Join(f.dir, "result.json")
	code, stdout, stderr := runMain("--config", cfg, "--iters", "2", "--test", "--json", jsonOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "trained 2 steps") || !regexp.MustCompile(`^Test loss \d+\.\d{3}, Test ppl \d+\.\d{3}\.$`).MatchString(lines[1]) {
		t.Errorf("stdout %q: want the training line, then mlx-lm's test line", stdout)
	}
	var res train.Result
	if err := json.Unmarshal([]byte(readFile(t, jsonOut)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Test == nil || res.Test.Examples != 3 || fmt.Sprintf("Test loss %.3f, Test ppl %.3f.", res.Test.Loss, res.Test.PPL) != lines[1] {
		t.Errorf("json test %+v, stdout %q", res.Test, lines[1])
	}
	for _, key := range []string{"project_name", "report_to", "trust_remote_code"} {
		if !strings.Contains(stderr, "config: "+cfg+": "+key+": no effect: ") {
			t.Errorf("stderr has no note for %s:\n%s", key, stderr)
		}
	}
	code, stdout, stderr = runMain("--config", cfg, "--train=false", "--test")
	if code != 0 || !strings.HasPrefix(stdout, "Test loss ") || strings.Count(stdout, "\n") != 1 || strings.Contains(stderr, "iter ") {
		t.Errorf("--train=false --test: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if stdout != lines[1]+"\n" {
		t.Errorf("evaluating the saved adapter gave %q, after training %q", stdout, lines[1])
	}
	code, _, stderr = runMain("--config", cfg, "--mask-prompt=false")
	if code != 1 || !strings.Contains(stderr, "train: config: mask_prompt: false: the denoising objective never scores the prompt") {
		t.Errorf("--mask-prompt=false: exit %d, stderr %q", code, stderr)
	}
}

// --help names the engines compiled in, with the MLX version under -tags mlx.
func TestHelpNamesEngines(t *testing.T) {
	code, stdout, _ := runMain("--help")
	if want := "(compiled in: " + mx.DescribeEngines() + ")"; code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("--help: exit %d, lacks %q", code, want)
	}
	if slices.Contains(mx.Engines(), "mlx") && !strings.Contains(stdout, "mlx on MLX ") {
		t.Error("--help does not name the MLX version")
	}
}
