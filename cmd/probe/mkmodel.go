package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/internal/cli"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/tokenizer"
)

func mkmodelCommand() *cobra.Command {
	var preset, bits, tok, out, corpus, backend string
	var seed uint64
	var verbose, vision, sharded, hfLayout bool
	var window, layers, canvas int
	cmd := &cobra.Command{
		Use:   "mkmodel --preset tiny|small|bench|real --seed N [--bits 0|4|8|mixed] [--tokenizer bpe|bytes] [--vision] [--sharded] --out DIR",
		Short: "Write a synthetic DiffusionGemma checkpoint in the MLX layout",
		Long: "Write a synthetic checkpoint: config.json (nested layout), generation_config.json, model.safetensors\n" +
			"(MLX affine packing when quantized) and tokenizer.json. --preset real writes only the configs (with the\n" +
			"quantization map of --bits) and prints the parameter count, unless --sharded: then, with --bits 4, 8 or\n" +
			"mixed, it writes the 26B weights too, drawn in their quantized form one layer at a time into layer shards\n" +
			"(about 14 GB at 4 bits), or with --bits 0 unquantized in bfloat16 (about 50 GB, the release's dtype; --hf-layout\n" +
			"also names the experts as save_pretrained does). --sharded does the same for any preset. --vision adds a tiny vision tower\n" +
			"(hidden 32, 2 layers, 16 soft tokens per image) to the synthetic presets; real always has its tower.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			cfg, err := dg.Preset(preset)
			if err != nil {
				return err
			}
			if err := overrideGeometry(cfg, window, layers, canvas); err != nil {
				return err
			}
			if vision && cfg.VisionConfig == nil {
				dg.WithSyntheticVision(cfg)
			}
			total, active := dg.CountParams(cfg)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "preset %s: %d parameters (%.3fB), %d active per token (%.3fB)\n", preset, total, float64(total)/1e9, active, float64(active)/1e9)
			if vision {
				fmt.Fprintf(w, "vision tower: %d parameters\n", dg.CountVisionParams(cfg))
			}
			if verbose {
				tensors := dg.ExpectedTensors(cfg)
				if vision {
					tensors = append(tensors, dg.VisionTensors(cfg)...)
				}
				for _, ts := range tensors {
					fmt.Fprintf(w, "  %s %v\n", ts.Name, ts.Shape)
				}
			}
			if preset == dg.PresetReal {
				if !sharded {
					// Config only, but with the quantization map --bits asks for (as Synthesize
					// writes it for the other presets), so that estimates and loaders see a
					// quantized checkpoint's geometry.
					q, err := dg.QuantizationPolicy(cfg, bits)
					if err != nil {
						return err
					}
					cfg.Quantization = q
					if q != nil {
						cfg.TextConfig.Dtype = "bfloat16"
					}
					if err := writeStaged(cmd.Context(), out, func(dir string) error { return dg.WriteCheckpoint(dir, cfg, nil, nil) }); err != nil {
						return err
					}
					fmt.Fprintf(w, "wrote %s (config only, bits %s; --sharded writes the weights)\n", out, bits)
					return nil
				}
			}
			lines := tokenizer.SyntheticCorpus()
			if corpus != "" {
				b, err := os.ReadFile(corpus)
				if err != nil {
					return fmt.Errorf("--corpus: %w", err)
				}
				lines = strings.Split(string(b), "\n")
			}
			var tj []byte
			switch tok {
			case "bpe":
				tj, err = tokenizer.NewSynthetic(cfg.TextConfig.VocabSize, lines)
			case "bytes":
				tj, err = tokenizer.NewSynthetic(cfg.TextConfig.VocabSize, nil)
			default:
				err = fmt.Errorf("--tokenizer %q: want bpe or bytes", tok)
			}
			if err != nil {
				return err
			}
			if hfLayout && (!sharded || bits != dg.BitsNone) {
				return fmt.Errorf("--hf-layout writes the unquantized release layout: it needs --sharded --bits 0")
			}
			if sharded {
				if vision {
					return fmt.Errorf("--sharded writes text-only checkpoints; drop --vision")
				}
				start := time.Now()
				var st dg.ShardStats
				err := writeStaged(cmd.Context(), out, func(dir string) (err error) {
					if bits == dg.BitsNone {
						st, err = dg.WriteSyntheticBF16Shards(dir, cfg, seed, hfLayout, tj)
					} else {
						st, err = dg.WriteSyntheticShards(dir, cfg, seed, bits, tj)
					}
					return err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "wrote %s (bits %s, seed %d): %d shards, %d tensors, %.2f GB in %.1f s\n",
					out, bits, seed, st.Shards, st.Tensors, float64(st.Bytes)/1e9, time.Since(start).Seconds())
				return nil
			}
			e, err := mx.Open(backend)
			if err != nil {
				return err
			}
			weights, err := dg.Synthesize(e, cfg, seed, bits)
			if err != nil {
				return err
			}
			if err := writeStaged(cmd.Context(), out, func(dir string) error { return dg.WriteCheckpoint(dir, cfg, weights, tj) }); err != nil {
				return err
			}
			fmt.Fprintf(w, "wrote %s (bits %s, seed %d)\n", out, bits, seed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&preset, "preset", "tiny", "geometry: tiny, small, bench or real")
	f.Uint64Var(&seed, "seed", 0, "seed of the random weights")
	f.StringVar(&bits, "bits", "0", "quantization: 0 (f32), 4, 8 or mixed (8-bit attention/MLP/router, 4-bit rest)")
	f.StringVar(&tok, "tokenizer", "bpe", "synthetic tokenizer: bpe (merges trained on --corpus) or bytes (byte fallback only)")
	f.StringVar(&corpus, "corpus", "", "text file whose lines train the synthetic tokenizer's merges")
	f.StringVar(&out, "out", "", "output directory")
	f.StringVar(&backend, "backend", "go", "engine used to quantize")
	f.BoolVar(&verbose, "verbose", false, "list every tensor and its logical shape")
	f.BoolVar(&sharded, "sharded", false, "draw the weights straight in their quantized form, one layer shard at a time (needs --bits 4, 8 or mixed)")
	f.BoolVar(&hfLayout, "hf-layout", false, "with --sharded --bits 0: name the experts as transformers' save_pretrained does (no .weight), the original release's layout")
	f.BoolVar(&vision, "vision", false, "add a tiny vision tower (image-text checkpoints; see probe forward --image)")
	f.IntVar(&window, "sliding-window", 0, "override the preset's sliding_window")
	f.IntVar(&layers, "layers", 0, "override the preset's num_hidden_layers (layer pattern [sliding×5, full], last full)")
	f.IntVar(&canvas, "canvas", 0, "override the preset's canvas_length")
	return cmd
}

// overrideGeometry applies mkmodel's geometry flags (0 = keep the preset's value).
func overrideGeometry(cfg *dg.Config, window, layers, canvas int) error {
	t := &cfg.TextConfig
	if window > 0 {
		t.SlidingWindow = window
	}
	if layers > 0 {
		t.NumHiddenLayers = layers
		t.LayerTypes = dg.DefaultLayerTypes(layers)
	}
	if canvas > 0 {
		cfg.CanvasLength = canvas
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("geometry overrides: %w", err)
	}
	return nil
}

// writeStaged runs write on a hidden directory beside out and moves what it wrote into
// out (created if need be, files of the same name replaced) only once all of it is
// written: an error, SIGINT or SIGTERM leaves out as it was.
func writeStaged(ctx context.Context, out string, write func(dir string) error) error {
	out = filepath.Clean(out)
	st, err := atomicfile.StageDir(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	defer st.Remove()
	defer cli.OnAbandon(ctx, st.Remove)()
	if err := write(st.Path); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return cli.Interrupted(ctx)
	}
	if err := st.MoveInto(); err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	return nil
}
