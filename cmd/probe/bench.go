package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/internal/sysmem"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/engines"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
	"github.com/dgtune/dgtune/session"
	"github.com/dgtune/dgtune/train"
)

// BenchResult is `probe bench`'s JSON contract.
type BenchResult struct {
	TokensPerSec    float64 `json:"tokens_per_sec"`
	MsPerStep       float64 `json:"ms_per_step"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"`
	TrainableParams int64   `json:"trainable_params"`
	Backend         string  `json:"backend"`
	PromptLen       int     `json:"prompt_len"`
	CanvasLen       int     `json:"canvas_len"`
	Steps           int     `json:"steps"`
	Rank            int     `json:"rank"`
	// LoRAKeys are the adapted linears of each layer when --lora-keys chose them.
	LoRAKeys       []string `json:"lora_keys,omitempty"`
	GradCheckpoint bool     `json:"grad_checkpoint"`
	CPUMsPerStep   float64  `json:"cpu_ms_per_step"`
	Threads        int      `json:"threads"`
	ComputeDType   string   `json:"compute_dtype"`
	Compiled       bool     `json:"compiled"`
	// Lookahead: each step's graph was built while the device ran the previous step.
	Lookahead bool `json:"lookahead,omitempty"`
	// GraphMsPerStep is the part of a step spent before its one evaluation: drawing the
	// noise and building the forward, backward and update graphs (on the mlx engine the
	// rest is MLX running them, and with lookahead the device runs the previous step
	// meanwhile; on the go engine the work happens while building).
	GraphMsPerStep float64 `json:"graph_ms_per_step"`
	// LoadSeconds is the time to open the engine and load the checkpoint (to arrays the
	// engine holds, evaluated by the warm-up step at the latest).
	LoadSeconds float64 `json:"load_seconds"`
	// WarmupSeconds is the warm-up steps' wall time (the first step also traces and, on
	// MLX-CUDA, compiles kernels and CUDA graphs).
	WarmupSeconds float64 `json:"warmup_seconds"`
	// The engine's own allocator counters (mlx engine), over the whole run: the peak
	// includes the weights and the warm-up step.
	Device          string `json:"device,omitempty"`
	EnginePeakBytes int64  `json:"engine_peak_bytes,omitempty"`
	EngineActive    int64  `json:"engine_active_bytes,omitempty"`
	EngineCache     int64  `json:"engine_cache_bytes,omitempty"`
	MemoryLimit     int64  `json:"engine_memory_limit_bytes,omitempty"`
}

func benchCommand() *cobra.Command {
	var modelDir, backend, cpuProfile, computeDType string
	var memoryLimitGB float64
	var promptLen, canvasLen, steps, rank, warmup int
	var loraKeys []string
	var asJSON, gradCheckpoint, compileStep, synchronous bool
	cmd := &cobra.Command{
		Use:   "bench --model DIR --prompt-len N --canvas-len L --steps S [--backend go|mlx] [--rank R] [--grad-checkpoint] --json",
		Short: "Time LoRA training steps (forward, backward through encoder and decoder, AdamW update)",
		Long: "Time S LoRA training steps after --warmup steps (default 1) on random ids; tokens_per_sec is (N+L)·S / time.\n" +
			"peak_rss_bytes is the process's high-water resident set size; threads is GOMAXPROCS; cpu_ms_per_step is\n" +
			"user+system CPU time per step (on a shared machine, steadier than wall time).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if promptLen < 1 || canvasLen < 1 || steps < 1 || rank < 1 {
				return fmt.Errorf("--prompt-len, --canvas-len, --steps and --rank must be at least 1")
			}
			if warmup < 0 {
				return fmt.Errorf("--warmup must be at least 0")
			}
			loadStart := time.Now()
			e, err := session.OpenEngine(backend, computeDType, memoryLimitGB)
			if err != nil {
				return err
			}
			dt, _ := session.ComputeDType(computeDType)
			m, err := dg.Load(e, modelDir, dg.LoadOptions{DType: dt})
			if err != nil {
				return err
			}
			m.GradCheckpoint = gradCheckpoint
			lc := lora.DefaultConfig()
			lc.Rank = rank
			if len(loraKeys) > 0 {
				lc.Keys = loraKeys
			}
			a, err := lora.Attach(m, lc, 1)
			if err != nil {
				return err
			}
			opt, err := optim.NewAdamW(optim.Params(a.Params()), optim.AdamWDefaults(1e-4))
			if err != nil {
				return err
			}
			vocab := m.Config.TextConfig.VocabSize
			rng := rand.New(rand.NewPCG(1, 2))
			ids := func(n int) []int32 {
				v := make([]int32, n)
				for i := range v {
					v[i] = int32(rng.IntN(vocab))
				}
				return v
			}
			ex := objective.Example{Prompt: ids(promptLen), Target: ids(canvasLen)}
			obj := objective.Reference(0.4, 0.8)
			var compiled *train.DenseStep
			if compileStep {
				// The loss and its gradients, traced once and replayed: the step's data
				// (ids, weights, normaliser) and the parameters are the inputs.
				compiled = train.NewDenseStep(e, m, a)
				defer compiled.Release()
			}
			var graphTime time.Duration
			// As train does alone (train/inflight.go), a lazy engine builds each step while
			// the device runs the one before; inFlight is the updated parameters of that one.
			_, async := e.(mx.AsyncEvaluator)
			lookahead := async && !synchronous
			var inFlight []*mx.Array
			draws := engines.Draws(e) // as train draws (session.Session.Draws)
			stepOnce := func(i int) error {
				began := time.Now()
				c := obj.Draw(mx.Key(draws, uint64(i)), ex.Target, vocab)
				params := optim.Params(a.Params())
				var g optim.Params
				if compiled != nil {
					d, err := obj.DenseInputs(e, ex, c, obj.Count(c))
					if err != nil {
						return err
					}
					if _, g, err = compiled.Grad(params, d); err != nil {
						return err
					}
				} else {
					var err error
					_, g, err = optim.ValueAndGrad(a, params, func() *mx.Array {
						loss, _ := objective.BatchLoss([]objective.Terms{obj.ExampleTerms(m, ex, c)})
						return loss
					})
					if err != nil {
						return err
					}
				}
				updated := opt.Update(params, g)
				graphTime += time.Since(began)
				if lookahead {
					// This step's graph was built while the device ran the previous one; wait for
					// that one before launching this, so one step's buffers are live at a time.
					mx.Eval(inFlight...)
					inFlight = updated.Arrays()
					mx.AsyncEval(inFlight...)
				} else {
					mx.Eval(updated.Arrays()...)
				}
				return a.SetParams(updated)
			}
			// finish waits for the step still on the device (lookahead).
			finish := func() {
				mx.Eval(inFlight...)
				inFlight = nil
			}
			loadSeconds := time.Since(loadStart).Seconds()
			warmStart := time.Now()
			ctx := cmd.Context()
			for i := range warmup {
				if ctx.Err() != nil {
					return cli.Interrupted(ctx)
				}
				// The first warm-up step draws key 0, as the timed ones draw 1..S.
				if err := stepOnce(-i); err != nil {
					return err
				}
			}
			finish()
			warmupSeconds := time.Since(warmStart).Seconds()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				// An interrupted run's profile is cut short: removed, not left half-written.
				defer cli.OnAbandon(ctx, func() { os.Remove(cpuProfile) })()
				defer func() {
					if ctx.Err() != nil {
						os.Remove(cpuProfile)
					}
				}()
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			graphTime = 0
			start, cpu0 := time.Now(), cpuSeconds()
			for i := 1; i <= steps; i++ {
				if ctx.Err() != nil {
					return cli.Interrupted(ctx)
				}
				if err := stepOnce(i); err != nil {
					return err
				}
			}
			finish()
			el := time.Since(start).Seconds()
			cpu := cpuSeconds() - cpu0
			var n int64
			for _, p := range a.Params() {
				n += int64(p.Size())
			}
			res := BenchResult{
				TokensPerSec: float64((promptLen+canvasLen)*steps) / el, MsPerStep: 1000 * el / float64(steps),
				PeakRSSBytes: sysmem.PeakRSS(), TrainableParams: n, Backend: e.Name(),
				PromptLen: promptLen, CanvasLen: canvasLen, Steps: steps, Rank: rank, LoRAKeys: loraKeys,
				GradCheckpoint: gradCheckpoint, Threads: runtime.GOMAXPROCS(0), CPUMsPerStep: 1000 * cpu / float64(steps),
				ComputeDType: dt.String(), Compiled: compileStep, Lookahead: lookahead, GraphMsPerStep: 1000 * graphTime.Seconds() / float64(steps),
				LoadSeconds: loadSeconds, WarmupSeconds: warmupSeconds,
			}
			if d, ok := mx.Device(e); ok {
				res.Device = d.Kind
				if d.Name != "" {
					res.Device += " (" + d.Name + ")"
				}
			}
			if ms, ok := mx.Memory(e); ok {
				res.EnginePeakBytes, res.EngineActive, res.EngineCache = ms.Peak, ms.Active, ms.Cache
			}
			if l, ok := e.(mx.MemoryLimiter); ok {
				res.MemoryLimit, _ = l.MemoryLimit()
			}
			w := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.Marshal(res)
				fmt.Fprintln(w, string(b))
				return nil
			}
			fmt.Fprintf(w, "%s: %.1f tokens/s, %.1f ms/step, peak RSS %d MiB, %d trainable\n",
				res.Backend, res.TokensPerSec, res.MsPerStep, res.PeakRSSBytes>>20, res.TrainableParams)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "checkpoint directory")
	f.StringVar(&backend, "backend", "auto", "engine: auto, go or mlx")
	f.IntVar(&promptLen, "prompt-len", 64, "prompt tokens")
	f.IntVar(&canvasLen, "canvas-len", 64, "canvas tokens")
	f.IntVar(&steps, "steps", 3, "timed steps after the warm-up")
	f.IntVar(&rank, "rank", 8, "LoRA rank")
	f.StringSliceVar(&loraKeys, "lora-keys", nil, "adapted linears of each layer, comma-separated, e.g. self_attn.q_proj,self_attn.v_proj (config lora_parameters.keys; default: the model's default targets)")
	f.IntVar(&warmup, "warmup", 1, "untimed steps before the timed ones")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.BoolVar(&gradCheckpoint, "grad-checkpoint", false, "recompute each layer in the backward pass (config grad_checkpoint)")
	f.BoolVar(&compileStep, "compile", false, "compile the loss and gradient (mlx engine: mlx_compile; the go engine runs it as is)")
	f.BoolVar(&synchronous, "synchronous", false, "wait for each step before building the next (by default the mlx engine builds it while the device runs the previous one, as train does)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the timed steps to this file")
	f.StringVar(&computeDType, "compute-dtype", "float32", "float32, or bfloat16 (mlx engine; config compute_dtype)")
	f.Float64Var(&memoryLimitGB, "memory-limit-gb", 0, "mlx engine allocator limit in GiB (0 = the engine's default; config memory_limit_gb)")
	return cmd
}
