package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/sysmem"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/session"
)

// LoadResult is probe load's JSON.
type LoadResult struct {
	Backend      string  `json:"backend"`
	ComputeDType string  `json:"compute_dtype"`
	Seconds      float64 `json:"seconds"`
	WeightBytes  int64   `json:"weight_bytes"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// Engine counters (mlx engine): MLX's peak and active memory after the load.
	EnginePeakBytes   int64 `json:"engine_peak_bytes,omitempty"`
	EngineActiveBytes int64 `json:"engine_active_bytes,omitempty"`
}

func loadCommand() *cobra.Command {
	var modelDir, backend, computeDType string
	var quantizeOnLoad int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "load --model DIR [--backend go|mlx] [--compute-dtype float32|bfloat16] [--quantize-on-load 4|8] --json",
		Short: "Time loading a checkpoint and report the process's peak resident memory",
		Long: "Open the engine, load the checkpoint as train does and evaluate every base weight (casts to the compute\n" +
			"dtype included); report the seconds, the weights' bytes and the process's peak RSS. On the mlx engine MLX\n" +
			"reads the safetensors files itself; MLXENG_LOAD=go copies them in through Go's memory map instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelDir == "" {
				return fmt.Errorf("--model is required")
			}
			start := time.Now()
			e, err := session.OpenEngine(backend, computeDType, 0)
			if err != nil {
				return err
			}
			dt, _ := session.ComputeDType(computeDType)
			opt := dg.LoadOptions{DType: dt}
			switch quantizeOnLoad {
			case 0:
			case 4, 8:
				opt.Quantize = &dg.QuantRecipe{Bits: fmt.Sprint(quantizeOnLoad), GroupSize: 64}
			default:
				return fmt.Errorf("--quantize-on-load %d: want 0, 4 or 8", quantizeOnLoad)
			}
			m, err := dg.Load(e, modelDir, opt)
			if err != nil {
				return err
			}
			var arrays []*mx.Array
			var n int64
			for _, a := range m.WeightArrays() {
				arrays = append(arrays, a)
				n += int64(a.Size() * a.DType().Size())
			}
			mx.Eval(arrays...)
			res := LoadResult{Backend: e.Name(), ComputeDType: dt.String(), Seconds: time.Since(start).Seconds(),
				WeightBytes: n, PeakRSSBytes: sysmem.PeakRSS()}
			if ms, ok := mx.Memory(e); ok {
				res.EnginePeakBytes, res.EngineActiveBytes = ms.Peak, ms.Active
			}
			w := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.Marshal(res)
				fmt.Fprintln(w, string(b))
				return nil
			}
			fmt.Fprintf(w, "%s: loaded %d MiB of weights in %.2f s, peak RSS %d MiB\n",
				res.Backend, res.WeightBytes>>20, res.Seconds, res.PeakRSSBytes>>20)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "checkpoint directory")
	f.StringVar(&backend, "backend", "auto", "engine: auto, go or mlx")
	f.StringVar(&computeDType, "compute-dtype", "float32", "float32, or bfloat16 (mlx engine; config compute_dtype)")
	f.IntVar(&quantizeOnLoad, "quantize-on-load", 0, "quantize an unquantized checkpoint while loading (4 or 8 bits, group 64; config quantize_on_load)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
