package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/internal/cli"
	"github.com/dgtune/dgtune/lora"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	_ "github.com/dgtune/dgtune/mx/engines"
	"github.com/dgtune/dgtune/objective"
	"github.com/dgtune/dgtune/optim"
)

func forwardCommand() *cobra.Command {
	var modelDir, promptS, canvasS, adapterDir, backend, image, targetS, corruptS, positions, out string
	var selfCond bool
	var encoderWeight float64
	cmd := &cobra.Command{
		Use:   "forward --model DIR --prompt 2,105,... --canvas 5,9,... [--adapter DIR] [--image FILE] [--self-cond] [--target ... --corrupt ... [--encoder-loss-weight W]] --out FILE.safetensors",
		Short: "Dump the logits (and loss and adapter gradients) of one forward pass",
		Long: "Run encoder(prompt) → decoder(canvas) with fresh caches and no self-conditioning and write\n" +
			"`logits` (f32 [1, L, V], softcapped). With --target and --corrupt also write `loss` (f32 [1]) and,\n" +
			"for every tensor K of the adapter, `grad.K` = d loss / d K. Needs only config.json and the weights.\n" +
			"With --image the prompt holds the config's image_token_id once; it is expanded to boi + one image\n" +
			"token per soft token + eoi, as the chat path does, and the image enters the encoder.\n" +
			"With --self-cond the decoder runs twice: a first pass without self-conditioning, then a second\n" +
			"conditioned on softmax(first logits)·E·√H (temperature 1); `logits` is the second pass's, and the\n" +
			"loss and gradients are the second pass's with the first pass held constant. With\n" +
			"--encoder-loss-weight W the loss adds W × the encoder's next-token cross-entropy over the clean\n" +
			"prompt + target (through the final norm and the tied head), also written as `encoder_loss`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelDir == "" || out == "" {
				return fmt.Errorf("--model and --out are required")
			}
			prompt, err := parseIDs("--prompt", promptS)
			if err != nil {
				return err
			}
			canvas, err := parseIDs("--canvas", canvasS)
			if err != nil {
				return err
			}
			if len(canvas) == 0 {
				return fmt.Errorf("--canvas: at least one id is required")
			}
			e, err := mx.Open(backend)
			if err != nil {
				return err
			}
			m, err := dg.Load(e, modelDir, dg.LoadOptions{})
			if err != nil {
				return err
			}
			vocab := m.Config.TextConfig.VocabSize
			for _, ids := range [][]int32{prompt, canvas} {
				for _, id := range ids {
					if id < 0 || int(id) >= vocab {
						return fmt.Errorf("token id %d out of range [0, %d)", id, vocab)
					}
				}
			}
			var adapter *lora.Adapter
			if adapterDir != "" {
				f, err := lora.LoadDir(e, adapterDir)
				if err != nil {
					return err
				}
				if adapter, err = lora.Mount(m, f); err != nil {
					return err
				}
			}
			var srcs []*imageproc.Source
			if image != "" {
				if prompt, srcs, err = withImage(m.Config, prompt, image); err != nil {
					return err
				}
			}
			images, err := m.Images(srcs)
			if err != nil {
				return err
			}
			if encoderWeight != 0 && targetS == "" {
				return fmt.Errorf("--encoder-loss-weight needs --target and --corrupt (the encoder reads prompt + target)")
			}
			pa := mx.FromInt32(e, prompt, 1, len(prompt))
			ca := mx.FromInt32(e, canvas, 1, len(canvas))
			cache := m.NewCache()
			if err := m.EncodeWithImages(pa, images, cache); err != nil {
				return err
			}
			logits := m.Decode(ca, cache, nil)
			if selfCond {
				logits = objective.SelfConditioned(m, ca, cache)
			}
			result := map[string]*mx.Array{"logits": logits}
			if targetS != "" || corruptS != "" {
				lo := lossOptions{positions: positions, selfCond: selfCond, encoderWeight: encoderWeight}
				if err := addLoss(result, m, adapter, prompt, srcs, canvas, targetS, corruptS, lo); err != nil {
					return err
				}
			}
			if cmd.Context().Err() != nil {
				return cli.Interrupted(cmd.Context())
			}
			if err := mx.SaveSafetensors(out, result, map[string]string{"format": "dgtune-probe"}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d tensors)\n", out, len(result))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "checkpoint directory")
	f.StringVar(&promptS, "prompt", "", "comma-separated prompt ids (may be empty)")
	f.StringVar(&canvasS, "canvas", "", "comma-separated canvas ids")
	f.StringVar(&adapterDir, "adapter", "", "adapter directory to mount")
	f.StringVar(&backend, "backend", "auto", "engine: auto, go or mlx")
	f.StringVar(&image, "image", "", "image file for the prompt's image token")
	f.StringVar(&targetS, "target", "", "comma-separated target ids (one per canvas position)")
	f.StringVar(&corruptS, "corrupt", "", "comma-separated 0/1 flags: which canvas positions are corrupted")
	f.StringVar(&positions, "loss-positions", "corrupted", "score corrupted positions or all")
	f.BoolVar(&selfCond, "self-cond", false, "two decoder passes, the second conditioned on the first's logits (whose gradient is stopped)")
	f.Float64Var(&encoderWeight, "encoder-loss-weight", 0, "add W × the encoder's next-token loss over prompt + target (needs --target)")
	f.StringVar(&out, "out", "", "output safetensors file")
	return cmd
}

// lossOptions are the objective flags of probe forward.
type lossOptions struct {
	positions     string
	selfCond      bool
	encoderWeight float64
}

// addLoss computes the denoising loss of the given corruption and its gradient with
// respect to every adapter tensor.
func addLoss(result map[string]*mx.Array, m *dg.Model, adapter *lora.Adapter, prompt []int32, images []*imageproc.Source, canvas []int32, targetS, corruptS string, lo lossOptions) error {
	target, err := parseIDs("--target", targetS)
	if err != nil {
		return err
	}
	flags, err := parseIDs("--corrupt", corruptS)
	if err != nil {
		return err
	}
	if len(target) != len(canvas) || len(flags) != len(canvas) {
		return fmt.Errorf("--target (%d ids) and --corrupt (%d flags) must match the canvas (%d ids)", len(target), len(flags), len(canvas))
	}
	c := objective.Corruption{Corrupt: make([]bool, len(flags)), Canvas: canvas, SelfCond: lo.selfCond}
	for i, f := range flags {
		if f != 0 && f != 1 {
			return fmt.Errorf("--corrupt: flag %d at position %d: want 0 or 1", f, i)
		}
		c.Corrupt[i] = f == 1
	}
	obj := objective.Reference(0, 1)
	obj.Positions = objective.Positions(lo.positions)
	obj.EncoderWeight = lo.encoderWeight
	if err := obj.Validate(); err != nil {
		return err
	}
	ex := objective.Example{Prompt: prompt, Target: target, Images: images}
	if lo.encoderWeight != 0 {
		t := obj.ExampleTerms(m, ex, c)
		result["encoder_loss"] = mx.Reshape(mx.DivScalar(t.EncSum, max(t.EncCount, 1)), 1)
	}
	lossOf := func() *mx.Array {
		loss, _ := objective.BatchLoss([]objective.Terms{obj.ExampleTerms(m, ex, c)})
		return mx.Reshape(loss, 1)
	}
	if adapter == nil {
		result["loss"] = lossOf()
		return nil
	}
	loss, grads, err := optim.ValueAndGrad(adapter, adapter.Params(), lossOf)
	if err != nil {
		return err
	}
	result["loss"] = mx.Reshape(loss, 1)
	for n, g := range grads {
		result["grad."+n] = mx.AsType(g, mx.Float32)
	}
	return nil
}

// withImage reads the --image file and expands the prompt's single image placeholder into
// its image block.
func withImage(cfg *dg.Config, prompt []int32, path string) ([]int32, []*imageproc.Source, error) {
	src, err := imageproc.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--image: %w", err)
	}
	srcs := []*imageproc.Source{src}
	soft, err := cfg.SoftTokens(srcs)
	if err != nil {
		return nil, nil, fmt.Errorf("--image: %w", err)
	}
	expanded, err := dg.ExpandImageTokens(prompt, cfg, soft)
	if err != nil {
		return nil, nil, fmt.Errorf("--image: %w (put image_token_id %d once in --prompt)", err, cfg.ImageTokenID)
	}
	return expanded, srcs, nil
}

func parseIDs(flag, s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]int32, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an integer id", flag, p)
		}
		out[i] = int32(v)
	}
	return out, nil
}
