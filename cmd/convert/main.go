// Command convert quantizes an unquantized DiffusionGemma checkpoint (transformers'
// save_pretrained layout or an MLX bf16/f32 one) into an MLX-layout checkpoint for QLoRA,
// as `mlx_vlm.convert -q` does:
//
//	convert --model HF_OR_MLX_DIR --out DIR [--bits 4|8|mixed] [--group-size 32|64|128]
//	        [--dtype bfloat16|float16|float32] [--keep PATTERN...] [--overwrite]
//
// The work is in package convert; this file parses flags and prints the summary.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/convert"
	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/internal/sysmem"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	_ "github.com/dgtune/dgtune/mx/engines"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

func newCommand() *cobra.Command {
	var model, out, bits, dtype, backend string
	var group int
	var keep []string
	var overwrite bool
	var shardGB float64
	cmd := &cobra.Command{
		Use:   "convert --model DIR --out DIR [--bits 4|8|mixed] [--group-size 32|64|128] [--dtype bfloat16|float16|float32] [--keep PATTERN...]",
		Short: "Quantize a DiffusionGemma checkpoint for QLoRA into the MLX layout (as mlx_vlm.convert -q)",
		Long: "Reads a bf16/f16/f32 checkpoint (transformers' save_pretrained layout or MLX's) tensor by tensor and writes\n" +
			"an MLX-layout checkpoint: sharded safetensors (5 GiB shards) with model.safetensors.index.json, config.json\n" +
			"with MLX's quantization map (also as quantization_config), and the tokenizer, generation config and other\n" +
			"side files copied. The embedding, the linears of every layer, the router projection, the experts and the\n" +
			"vision projection are quantized (MLX affine); norms, scalars, router scales and the vision tower stay as\n" +
			"stored, cast to --dtype. --bits mixed is mlx-vlm's own DiffusionGemma recipe: 8 bits (group 64) for the\n" +
			"embedding, attention, dense MLP and router, 4 bits for the experts and the rest. --keep leaves modules\n" +
			"unquantized: a path suffix (embed_tokens, self_attn.o_proj) or a glob over the module path (*.layers.0.*).\n" +
			"The output appears only once complete; an existing --out is refused unless --overwrite.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" {
				return fmt.Errorf("--model is required")
			}
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			r := dg.QuantRecipe{Bits: bits, GroupSize: group, Keep: keep}
			if err := r.Validate(); err != nil {
				return flagError(err)
			}
			var dt *mx.DType
			if dtype != "" {
				d, err := dg.ParseStorageDType(dtype)
				if err != nil {
					return fmt.Errorf("--dtype %w", err)
				}
				dt = &d
			}
			if shardGB <= 0 {
				return fmt.Errorf("--max-shard-gb %g: want a positive size", shardGB)
			}
			e, err := mx.Open(backend)
			if err != nil {
				return err
			}
			res, err := convert.Run(cmd.Context(), convert.Options{
				Model: model, Out: out, Recipe: r, DType: dt, Overwrite: overwrite,
				MaxShardBytes: int64(shardGB * (1 << 30)), Engine: e,
				Progress: cmd.ErrOrStderr(), Terminal: cli.IsTerminal(cmd.ErrOrStderr()),
			})
			if err != nil {
				if cli.Signalled(cmd.Context()) {
					return cli.Interrupted(cmd.Context())
				}
				return err
			}
			report(cmd, r, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "input checkpoint directory (bf16, f16 or f32; HF or MLX layout)")
	f.StringVar(&out, "out", "", "output directory (refused if it exists, unless --overwrite)")
	f.StringVar(&bits, "bits", dg.Recipe4, "quantization: 4, 8 or mixed (8-bit g64 embedding/attention/dense MLP/router, 4-bit rest)")
	f.IntVar(&group, "group-size", 64, "quantization group size: 32, 64 or 128")
	f.StringVar(&dtype, "dtype", "", "dtype of unquantized tensors and scales: bfloat16, float16 or float32 (default: config.json's torch_dtype/dtype, else as stored)")
	f.StringSliceVar(&keep, "keep", nil, "leave these modules unquantized (repeatable or comma-separated): a path suffix, or a glob over the module path")
	f.BoolVar(&overwrite, "overwrite", false, "replace an existing --out (only once the new checkpoint is complete)")
	f.StringVar(&backend, "backend", "go", "engine that quantizes: go or mlx (both give the same bytes)")
	f.Float64Var(&shardGB, "max-shard-gb", 5, "largest shard in GiB (mlx-lm's 5)")
	return cmd
}

// flagError names the flag a recipe problem comes from.
func flagError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "bits"):
		return fmt.Errorf("--bits: %w", err)
	case strings.Contains(msg, "group size"):
		return fmt.Errorf("--group-size: %w", err)
	}
	return fmt.Errorf("--keep: %w", err)
}

func report(cmd *cobra.Command, r dg.QuantRecipe, res convert.Result) {
	w := cmd.OutOrStdout()
	dt := res.DType
	if dt == "" {
		dt = "as stored"
	}
	fmt.Fprintf(w, "wrote %s: bits %s, group size %d, %d modules quantized, %d tensors in %d shard(s), %.3f GB (%.3f bits per weight; input %.3f GB), unquantized tensors %s, in %.1f s, peak RSS %.2f GB\n",
		res.Out, r.Bits, r.GroupSize, res.Quantized, res.Tensors, res.Shards, float64(res.OutputBytes)/1e9, res.BitsPerWeight,
		float64(res.InputBytes)/1e9, dt, res.Elapsed.Seconds(), float64(sysmem.PeakRSS())/1e9)
	for _, k := range res.Kept {
		fmt.Fprintf(w, "  kept %s (%s)\n", k.Module, k.Why)
	}
}
