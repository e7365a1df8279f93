package diffusiongemma

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/mx"
)

// A raw Hugging Face checkpoint (transformers' save_pretrained, the original bf16 release)
// names its tensors as the MLX conversions do except for what mlx-vlm's sanitize step
// rewrites (diffusiongemma.md §2.1). Load applies the same rules, so either layout loads:
//
//   - experts.gate_up_proj / experts.down_proj carry no ".weight" suffix: add it;
//   - rotary_emb buffers are derived from the config: drop them;
//   - lm_head.weight is the tied embedding: drop it, after checking it is;
//   - model.encoder.language_model.* are copies of the decoder's weights (the encoder reuses
//     the decoder's layers): drop them, after checking each equals its decoder tensor — only
//     the encoder's layer_scalar tensors are its own;
//   - the vision tower's clipping buffers (input_min/max, output_min/max) mean nothing
//     without use_clipped_linears: drop them; and the whole tower when it is not built.

// EncoderLanguagePrefix is where raw checkpoints keep the encoder's copy of the text model.
const EncoderLanguagePrefix = "model.encoder.language_model."

// RawCheckpoint is what sanitize reads: names, tensor metadata and raw bytes.
type RawCheckpoint interface {
	Names() []string
	Info(name string) (mx.DType, []int, error)
	Data(name string) ([]byte, error)
}

// clippingBuffers are the calibration tensors of Gemma4ClippableLinear.
var clippingBuffers = []string{".input_min", ".input_max", ".output_min", ".output_max"}

// sanitize maps the names Build expects to the checkpoint's tensor names. Tensors it drops
// do not appear; copies it drops were checked against what they copy, and every problem
// (an encoder copy or lm_head that differs, a tensor spelled two ways) is listed in one error.
func sanitize(cfg *Config, ck RawCheckpoint, skipVision bool) (map[string]string, error) {
	names := ck.Names()
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	out := make(map[string]string, len(names))
	var problems, differ []string
	sameAs := func(copyName, original string) {
		if !have[original] {
			problems = append(problems, fmt.Sprintf("%s has no counterpart %s to be a copy of", copyName, original))
			return
		}
		eq, err := sameTensor(ck, copyName, original)
		if err != nil {
			problems = append(problems, err.Error())
		} else if !eq {
			differ = append(differ, copyName)
		}
	}
	for _, n := range names {
		switch {
		case strings.Contains(n, "rotary_emb"):
			continue
		case n == "lm_head.weight":
			sameAs(n, DecoderPrefix+".embed_tokens.weight")
			continue
		case strings.HasPrefix(n, EncoderLanguagePrefix) && !strings.HasSuffix(n, ".layer_scalar"):
			sameAs(n, DecoderPrefix+"."+strings.TrimPrefix(n, EncoderLanguagePrefix))
			continue
		case IsVisionTensor(n):
			if cfg.VisionConfig == nil || skipVision {
				continue // no tower to build: the config has none, or the caller skips it
			}
			if !cfg.VisionConfig.UseClippedLinears && slices.ContainsFunc(clippingBuffers, func(s string) bool { return strings.HasSuffix(n, s) }) {
				continue
			}
		}
		final := n
		if strings.HasSuffix(n, ".experts.gate_up_proj") || strings.HasSuffix(n, ".experts.down_proj") {
			final = n + ".weight"
			if have[final] {
				problems = append(problems, fmt.Sprintf("tensor %s is there twice, as %s and %s", final, n, final))
				continue
			}
		}
		out[final] = n
	}
	if len(differ) > 0 {
		problems = append(problems, fmt.Sprintf("%d copies differ from the decoder tensors they stand for (DiffusionGemma's encoder and tied head share the decoder's weights, so a checkpoint may repeat them but not change them): %s",
			len(differ), strings.Join(differ, ", ")))
	}
	if len(problems) > 0 {
		return nil, errors.New("diffusiongemma: checkpoint: " + strings.Join(problems, "; "))
	}
	return out, nil
}

// SanitizeNames maps the MLX names Load expects to a checkpoint's own tensor names by the
// rules above (the raw Hugging Face layout or the MLX one), for tools that read a
// checkpoint tensor by tensor (convert). Dropped copies are checked as Load checks them.
func SanitizeNames(cfg *Config, ck RawCheckpoint, skipVision bool) (map[string]string, error) {
	return sanitize(cfg, ck, skipVision)
}

// sameTensor reports whether two tensors have the same dtype, shape and bytes.
func sameTensor(ck RawCheckpoint, a, b string) (bool, error) {
	da, sa, err := ck.Info(a)
	if err != nil {
		return false, err
	}
	db, sb, err := ck.Info(b)
	if err != nil {
		return false, err
	}
	if da != db || !slices.Equal(sa, sb) {
		return false, nil
	}
	ba, err := ck.Data(a)
	if err != nil {
		return false, err
	}
	bb, err := ck.Data(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ba, bb), nil
}
