package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/estimate"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/shapeeng"
	"github.com/dgtune/dgtune/session"
)

func estimateCommand() *cobra.Command {
	var modelDir, preset, bits, computeDType, backend string
	var rank, promptLen, canvasLen, numLayers, threads int
	var needed, gradCheckpoint, mapped, asJSON bool
	cmd := &cobra.Command{
		Use:   "estimate (--model DIR | --preset NAME [--bits 4]) --rank R --prompt-len N --canvas-len L [--grad-checkpoint] [--backend go|mlx] [--compute-dtype bfloat16]",
		Short: "Predict a LoRA training step's peak memory on the go or mlx engine from shapes alone",
		Long: "Predict peak memory from the config alone (no weights are read): the training step runs on a shape-only\n" +
			"engine that records every array's size and lifetime as the go engine holds it — base weights (packed codes\n" +
			"and scales per the quantization map; the parts the go engine uses in place from the mapped checkpoint are\n" +
			"not in Go's heap), LoRA parameters, AdamW state, the graph the backward keeps, its cotangents and scratch —\n" +
			"and reports what is alive at the peak, plus Go's GC headroom (GOGC=100) on the heap.\n" +
			"With --backend mlx it predicts MLX's peak counter instead: every weight in MLX's memory in the compute dtype,\n" +
			"no GC headroom, the same recording of the step (README: the mlx engine's memory estimate says what it was\n" +
			"checked against).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg *dg.Config
			var err error
			switch {
			case modelDir != "":
				cfg, err = dg.LoadConfig(modelDir)
			case preset != "":
				cfg, err = dg.Preset(preset)
			default:
				err = fmt.Errorf("give --model or --preset")
			}
			if err != nil {
				return err
			}
			q := cfg.Quantization
			if bits != "" {
				if q, err = dg.QuantizationPolicy(cfg, bits); err != nil {
					return err
				}
			}
			dt, err := session.ComputeDType(computeDType)
			if err != nil {
				return err
			}
			lc := lora.DefaultConfig()
			lc.Rank, lc.NumLayers = rank, numLayers
			opt := estimate.Options{Quantization: q, LoRA: lc, PromptLen: promptLen, CanvasLen: canvasLen,
				GCPercent: 100, GradCheckpoint: gradCheckpoint, MappedWeights: mapped, Threads: threads, DType: dt, Engine: backend}
			if bits != "" {
				// What probe mkmodel --bits writes: bfloat16 scales and norms when quantized.
				opt.StoredDType = mx.Float32
				if q != nil {
					opt.StoredDType = mx.BFloat16
				}
			}
			if needed {
				opt.Retention = shapeeng.RetainNeeded
			}
			est, err := estimate.Step(cfg, opt)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.Marshal(estimateJSON{
					TotalBytes: est.Total, WeightsBytes: est.Weights, MappedWeightsBytes: est.MappedWeights,
					LoRABytes: est.LoRAParams + est.Gradients + est.OptimizerState, ActivationsBytes: est.Activations,
					GCHeadroomBytes: est.GCHeadroom, TrainableParams: est.TrainableParams,
					PromptLen: promptLen, CanvasLen: canvasLen, Rank: rank, GradCheckpoint: gradCheckpoint,
					Backend: est.Options.Engine, ComputeDType: est.Options.DType.String(),
				})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			fmt.Fprint(cmd.OutOrStdout(), est.String())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "checkpoint directory (only config.json is read)")
	f.StringVar(&preset, "preset", "", "synthetic preset instead of --model: tiny, small, bench or real")
	f.StringVar(&bits, "bits", "", "quantization policy 0, 4, 8 or mixed (default: the checkpoint's map)")
	f.IntVar(&rank, "rank", 8, "LoRA rank")
	f.IntVar(&numLayers, "num-layers", -1, "adapted layers (-1 = all)")
	f.IntVar(&promptLen, "prompt-len", 512, "prompt tokens")
	f.IntVar(&canvasLen, "canvas-len", 256, "canvas tokens")
	f.BoolVar(&needed, "needed-only", false, "free each array after its last reader (a leaner engine's floor)")
	f.IntVar(&threads, "threads", 0, "the go engine's GOMAXPROCS, whose workers each keep packing buffers (0: this machine's)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object (totals in bytes) instead of the breakdown")
	f.BoolVar(&gradCheckpoint, "grad-checkpoint", false, "a step with grad_checkpoint: true (per-layer recomputation)")
	f.StringVar(&computeDType, "compute-dtype", "float32", "float32, or bfloat16 (config compute_dtype)")
	f.StringVar(&backend, "backend", "go", "the engine whose peak to predict: go, or mlx (MLX's peak counter)")
	f.BoolVar(&mapped, "mapped", true, "weights loaded in place from the mapped checkpoint where their dtype allows (the go engine); false: all heap copies")
	return cmd
}

// estimateJSON is `probe estimate --json`'s object.
type estimateJSON struct {
	TotalBytes         int64  `json:"total_bytes"`
	WeightsBytes       int64  `json:"weights_bytes"`
	MappedWeightsBytes int64  `json:"mapped_weights_bytes"`
	LoRABytes          int64  `json:"lora_bytes"`
	ActivationsBytes   int64  `json:"activations_bytes"`
	GCHeadroomBytes    int64  `json:"gc_headroom_bytes"`
	TrainableParams    int64  `json:"trainable_params"`
	PromptLen          int    `json:"prompt_len"`
	CanvasLen          int    `json:"canvas_len"`
	Rank               int    `json:"rank"`
	GradCheckpoint     bool   `json:"grad_checkpoint"`
	Backend            string `json:"backend"`
	ComputeDType       string `json:"compute_dtype"`
}
