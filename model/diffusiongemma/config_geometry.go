// Per-layer geometry (§1.2 "Per-layer geometry"): what the forward pass reads from the
// text config for layer i.

package diffusiongemma

import "math"

// LayerType returns the attention kind of layer i.
func (t *TextConfig) LayerType(i int) LayerType { return t.LayerTypes[i] }

// IsFull reports whether layer i is a full-attention layer.
func (t *TextConfig) IsFull(i int) bool { return t.LayerTypes[i] == FullAttention }

// HasVProj reports whether layer i has a v_proj; full layers reuse the raw k projection.
func (t *TextConfig) HasVProj(i int) bool { return !t.IsFull(i) }

// LayerHeadDim returns the head dimension of layer i.
func (t *TextConfig) LayerHeadDim(i int) int {
	if t.IsFull(i) {
		return t.GlobalHeadDim
	}
	return t.HeadDim
}

// LayerKVHeads returns the number of key/value heads of layer i.
func (t *TextConfig) LayerKVHeads(i int) int {
	if t.IsFull(i) {
		return t.NumGlobalKeyValueHeads
	}
	return t.NumKeyValueHeads
}

// Rope returns the RoPE parameters of layer i.
func (t *TextConfig) Rope(i int) RopeParameters { return t.RopeParameters[t.LayerTypes[i]] }

// RopeAngles returns how many of the head's d/2 rotate-half pairs of layer i rotate: all of them
// for default RoPE, floor(partial·d/2) for proportional RoPE (pairs i ≥ RopeAngles keep angle 0).
func (t *TextConfig) RopeAngles(i int) int {
	d := t.LayerHeadDim(i)
	r := t.Rope(i)
	if r.RopeType != RopeProportional {
		return d / 2
	}
	return int(math.Floor(r.Partial() * float64(d) / 2))
}

// RopeInvFreqs returns the d/2 inverse frequencies of layer i: θ^(−2j/d) for rotated pairs
// (divided by factor for proportional RoPE) and 0 for the rest. The exponent's denominator is
// the full head dim even when only part of the head rotates (§3.1).
func (t *TextConfig) RopeInvFreqs(i int) []float64 {
	d := t.LayerHeadDim(i)
	r := t.Rope(i)
	angles := t.RopeAngles(i)
	scale := 1.0
	if r.RopeType == RopeProportional {
		scale = r.ScalingFactor()
	}
	out := make([]float64, d/2)
	for j := 0; j < angles; j++ {
		out[j] = math.Pow(r.RopeTheta, -2*float64(j)/float64(d)) / scale
	}
	return out
}

// EmbedScale is sqrt(hidden_size), the factor applied to token embeddings (§1.3).
func (t *TextConfig) EmbedScale() float64 { return math.Sqrt(float64(t.HiddenSize)) }

// RouterRootScale is hidden_size^-0.5, applied to the router input (§1.3, §3.4).
func (t *TextConfig) RouterRootScale() float64 { return 1 / math.Sqrt(float64(t.HiddenSize)) }
