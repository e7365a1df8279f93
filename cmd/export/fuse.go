package main

import (
	"errors"
	"fmt"

	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
)

// fuse folds the adapter into the base checkpoint and writes a complete checkpoint
// (lora.FuseCheckpoint). Before the result is moved into place it is loaded back with the
// normal loader and compared with base+adapter on a seeded probe input; a difference that
// is large next to the logits or to what the adapter itself does is reported as a warning.
//
// The base is --model, or the adapter's base_model. A --model that is not the adapter's
// base_model (another directory, while the recorded one exists) is refused unless
// forceBase: a base of the same geometry with other weights fuses without any error and
// gives a model that is neither.
func (x *exporter) fuse(adapterDir string, dequantize, forceBase bool) error {
	f, err := loadAdapter(x.e, adapterDir)
	if err != nil {
		return err
	}
	modelDir, err := x.fuseBase(adapterDir, f.Config.BaseModel, forceBase)
	if err != nil {
		return err
	}
	fc, err := lora.FuseCheckpoint(x.ctx, x.e, modelDir, f, dequantize)
	if err != nil {
		return err
	}
	var probe lora.FuseProbe
	err = x.writeStaged(func(dir string) error {
		if err := fc.Write(dir); err != nil {
			return err
		}
		if err := x.interrupted(); err != nil {
			return err
		}
		probe, err = fc.Probe(dir, x.seed)
		return err
	})
	if err != nil {
		return err
	}
	how := "unquantized"
	if fc.Config.Quantization != nil {
		how = "quantized modules re-quantized with their own bits and group size"
		if dequantize {
			how = "adapted modules stored dequantized"
		}
	}
	fmt.Fprintf(x.stdout, "fused %s (%d modules, rank %d, scale %g) into %s; wrote %s (%s)\n",
		adapterDir, len(f.Modules), f.Rank(), f.Scale(), modelDir, x.out, how)
	fmt.Fprintf(x.stdout, "probe (%d prompt + %d canvas ids, seed %d): max |logit| difference fused vs base+adapter %.6g (max |logit| %.6g; the adapter moves logits by up to %.6g)\n",
		probe.PromptLen, probe.CanvasLen, probe.Seed, probe.Diff, probe.MaxLogit, probe.Effect)
	if w := fuseWarning(probe, fc.Requantized()); w != "" {
		fmt.Fprintln(x.stderr, w)
	}
	return nil
}

// fuseWarning is the warning for a fused model that is far from base+adapter
// (lora.FuseProbe.Lossy), or "".
func fuseWarning(p lora.FuseProbe, requantized bool) string {
	if !p.Lossy() {
		return ""
	}
	w := fmt.Sprintf("warning: the fused model's logits differ from base+adapter by up to %.4g (the largest logit is %.4g, the adapter itself moves logits by up to %.4g)", p.Diff, p.MaxLogit, p.Effect)
	if requantized {
		w += ": re-quantizing the adapted modules lost much of the adapter; --dequantize stores them unquantized and exact, or ship the adapter instead of a fused model"
	}
	return w
}

// fuseBase is the checkpoint to fuse into: --model when given, checked against the
// adapter's recorded base_model, else the recorded one (resolved as eval does).
func (x *exporter) fuseBase(adapter, recorded string, force bool) (string, error) {
	if x.model == "" {
		if recorded == "" {
			return "", errors.New("--fuse needs --model: the adapter's config names no base_model")
		}
		return cli.ResolveBase(adapter, recorded)
	}
	if recorded == "" || force {
		return x.model, nil
	}
	resolved, err := cli.ResolveBase(adapter, recorded)
	if errors.Is(err, cli.ErrBaseNotFound) {
		fmt.Fprintf(x.stderr, "note: the adapter's base_model %s is not on this machine; cannot check that --model %s is that base\n", recorded, x.model)
		return x.model, nil
	}
	if err != nil {
		return "", err
	}
	if !cli.SameDir(resolved, x.model) {
		return "", fmt.Errorf("--model %s is not the adapter's base_model %s: fusing into another base of the same shape gives a model that is neither; pass --force-base if it is the same model in another place", x.model, recorded)
	}
	return x.model, nil
}
