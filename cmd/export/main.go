// Command export turns a LoRA adapter into something other tools load:
//
//	export --adapter DIR --format peft --out DIR [--model DIR]     HF PEFT files (or --format mlx)
//	export --adapter DIR --model DIR --fuse --out DIR [--dequantize] a complete fused checkpoint
//	export --merge A B --out DIR [--format mlx|peft]               two adapters in one (exact)
//
// The file formats, the arithmetic and the fused checkpoint (lora.FuseCheckpoint, with its
// verification probe) live in package lora; this command resolves the inputs, checks the
// adapter against the model's geometry before any work, writes into a hidden directory
// beside --out (atomicfile.StageDir) and moves it into place only when the result is
// complete, so a failure never leaves a half-written export behind.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	"github.com/dgtune/dgtune/mx"
	_ "github.com/dgtune/dgtune/mx/engines"
)

func main() { os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stdout, os.Stderr)) }

// Output layouts of an adapter export.
const (
	formatPEFT = "peft" // adapter_model.safetensors + PEFT adapter_config.json
	formatMLX  = "mlx"  // adapters.safetensors + mlx-lm/optiq adapter_config.json
)

// options are the command's own flags (the config keys come from cli.LoadConfig).
type options struct {
	adapter    string
	format     string
	out        string
	fuse       bool
	dequantize bool
	forceBase  bool
	merge      bool
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "export (--adapter DIR|FILE --format peft|mlx | --adapter DIR|FILE --fuse [--dequantize] | --merge A B) --out DIR",
		Short: "Export a LoRA adapter as HF PEFT files, fuse it into its base checkpoint, or merge two adapters",
		Long: "--format peft writes adapter_model.safetensors and a PEFT adapter_config.json (lora_alpha = scale·rank);\n" +
			"--format mlx writes the mlx-lm/optiq layout (also a way to convert a PEFT adapter back).\n" +
			"--fuse writes a complete checkpoint with the adapter folded into the base weights (quantized modules\n" +
			"re-quantized with their own bits and group size unless --dequantize) and prints the largest logit\n" +
			"difference between the fused model and base+adapter on a seeded probe input.\n" +
			"--merge A B concatenates two adapters along the rank axis (exact).\n" +
			"An adapter is a directory or one adapter file of a run (best_adapters.safetensors, 0000100_adapters.safetensors).\n" +
			"The adapter defaults to adapter_path; the base model to model, or the adapter's base_model. --fuse refuses a\n" +
			"--model that is not the adapter's base_model unless --force-base.",
		Args: func(cmd *cobra.Command, args []string) error {
			if o.merge {
				if len(args) != 2 {
					return fmt.Errorf("--merge takes two adapter directories (export --merge A B --out DIR), got %d", len(args))
				}
				return nil
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			if err := o.check(cmd); err != nil {
				return err
			}
			if o.adapter == "" {
				o.adapter = cfg.AdapterPath
			}
			e, err := mx.Open(cfg.Backend)
			if err != nil {
				return err
			}
			x := &exporter{e: e, model: cfg.Model, out: o.out, seed: cfg.Seed, ctx: cmd.Context(),
				stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
			switch {
			case o.merge:
				err = x.merge(args[0], args[1], o.format)
			case o.fuse:
				err = x.fuse(o.adapter, o.dequantize, o.forceBase)
			default:
				err = x.convert(o.adapter, o.format)
			}
			if err != nil && cli.Signalled(cmd.Context()) {
				return cli.Interrupted(cmd.Context())
			}
			return err
		},
	}
	cli.AddConfigFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.adapter, "adapter", "", "adapter directory (adapters.safetensors or adapter_model.safetensors + adapter_config.json) or one adapter file of a run; default adapter_path")
	f.StringVar(&o.format, "format", "", "adapter layout to write: peft or mlx (with --merge, default mlx)")
	f.StringVar(&o.out, "out", "", "output directory (must not exist, or be empty)")
	f.BoolVar(&o.fuse, "fuse", false, "fold the adapter into the base weights and write a complete checkpoint")
	f.BoolVar(&o.dequantize, "dequantize", false, "with --fuse: store the adapted modules unquantized instead of re-quantizing them")
	f.BoolVar(&o.forceBase, "force-base", false, "with --fuse: fuse into --model even when it is not the adapter's base_model")
	f.BoolVar(&o.merge, "merge", false, "merge the two adapters (directories or files) given as arguments into one")
	return cli.Abandonable(cmd)
}

// check rejects flag combinations that mean nothing, before anything is loaded.
func (o *options) check(cmd *cobra.Command) error {
	if o.out == "" {
		return errors.New("--out is required")
	}
	switch {
	case o.merge && o.fuse:
		return errors.New("--merge and --fuse cannot be combined: merge first, then fuse the merged adapter")
	case o.merge && cmd.Flags().Changed("adapter"):
		return errors.New("--merge takes its two adapters as arguments, not --adapter")
	case o.dequantize && !o.fuse:
		return errors.New("--dequantize only applies to --fuse")
	case o.forceBase && !o.fuse:
		return errors.New("--force-base only applies to --fuse")
	case o.fuse && o.format != "":
		return errors.New("--format does not apply to --fuse (it writes a checkpoint, not an adapter)")
	case o.merge && o.format == "":
		o.format = formatMLX
	case !o.merge && !o.fuse && o.format == "":
		return errors.New("nothing to do: choose --format peft (or mlx), --fuse or --merge A B")
	}
	if !o.fuse && o.format != formatPEFT && o.format != formatMLX {
		return fmt.Errorf("--format %q: want %s or %s", o.format, formatPEFT, formatMLX)
	}
	return nil
}

// loadAdapter reads an adapter directory or file (cli.LoadAdapter).
func loadAdapter(e mx.Engine, path string) (*lora.AdapterFile, error) {
	return cli.LoadAdapter(e, "adapter", path)
}
