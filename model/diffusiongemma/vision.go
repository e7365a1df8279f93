package diffusiongemma

import (
	"fmt"
	"math"

	"github.com/dgtune/dgtune/imageproc"
	"github.com/dgtune/dgtune/mx"
)

// VisionTower is the gemma4_vision encoder and the embed_vision projection (§2.3, §3.9):
// pixels → patches → 2-D-RoPE transformer → 3×3 position pooling → standardize →
// RMSNormNoScale → projection to the text hidden size. Its weights are frozen: adapters
// and full fine-tuning train the language model only.
type VisionTower struct {
	Config    *VisionConfig
	InputProj Linear    // patch_embedder.input_proj: 3·patch² → hidden
	PosTable  *mx.Array // patch_embedder.position_embedding_table [2, size, hidden]: row 0 by patch x, row 1 by y
	Layers    []*VisionLayer
	// StdBias and StdScale standardize the pooled features, (h − bias)·scale; nil when
	// vision_config.standardize is false.
	StdBias, StdScale *mx.Array
	Projection        Linear // embed_vision.embedding_projection: hidden → text hidden

	ropeInv []float64 // inverse frequencies of one RoPE half (§3.9)
}

// VisionLayer is one pre/post-normed block of the vision encoder.
type VisionLayer struct {
	Heads, KVHeads, HeadDim int

	Q, K, V, O   Linear
	QNorm, KNorm *mx.Array

	Gate, Up, Down Linear

	InputNorm, PostAttnNorm, PreFFNorm, PostFFNorm *mx.Array
}

func (v *VisionTower) eps() float64 { return v.Config.RMSNormEps }

// ImageOptions are the preprocessing options of this config's vision tower: its patch size
// and pooling kernel, and a budget of vision_soft_tokens_per_image soft tokens (else the
// tower's default_output_length, else the real model's 280).
func (c *Config) ImageOptions() (imageproc.Options, error) {
	v := c.VisionConfig
	if v == nil {
		return imageproc.Options{}, fmt.Errorf("diffusiongemma: the config has no vision_config: image inputs are not supported")
	}
	budget := c.VisionSoftTokensPerImage
	if budget <= 0 {
		budget = v.DefaultOutputLength
	}
	if budget <= 0 {
		budget = 280
	}
	o := imageproc.Options{PatchSize: v.PatchSize, PoolingKernel: v.PoolingKernelSize, MaxSoftTokens: budget}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("diffusiongemma: vision_config: %w", err)
	}
	return o, nil
}

// visionRopeInv returns the inverse frequencies of 2-D RoPE: the head splits into an
// x half and a y half of d/2 dims each, and each half is rotate-half RoPE over its own
// d/2 dims, so pair i of a half turns by pos·θ^(−2i/(d/2)) for i < d/4.
func visionRopeInv(headDim int, theta float64) []float64 {
	half := headDim / 2
	inv := make([]float64, half/2)
	for i := range inv {
		inv[i] = math.Pow(theta, -2*float64(i)/float64(half))
	}
	return inv
}

// ropeTables returns cos and sin [1, P, 1, d] for patches at (xs[p], ys[p]): dims
// [0, d/2) use the x position and [d/2, d) the y position, each half laid out as
// [angles, angles] to match its rotate-half pairs (i, i+d/4).
func ropeTables(e mx.Engine, xs, ys []int32, inv []float64, headDim int) (cos, sin *mx.Array) {
	q := headDim / 4
	c := make([]float32, len(xs)*headDim)
	s := make([]float32, len(xs)*headDim)
	for p := range xs {
		row := p * headDim
		for part, pos := range []int32{xs[p], ys[p]} {
			for i := range q {
				a := float64(pos) * inv[i]
				for _, j := range []int{part*2*q + i, part*2*q + q + i} {
					c[row+j] = float32(math.Cos(a))
					s[row+j] = float32(math.Sin(a))
				}
			}
		}
	}
	return mx.FromFloat32(e, c, 1, len(xs), 1, headDim), mx.FromFloat32(e, s, 1, len(xs), 1, headDim)
}

// rope2D applies 2-D RoPE to x [B, P, heads, d] with tables from ropeTables:
// x·cos + rot(x)·sin, where rot turns each half [a, b] into [−b, a] (rotate-half within
// the half, never mixing the x and y dims).
func rope2D(x, cos, sin *mx.Array) *mx.Array {
	d := x.Dim(-1)
	q := d / 4
	p := make([]*mx.Array, 4)
	for i := range p {
		p[i] = mx.SliceAxis(x, -1, i*q, (i+1)*q)
	}
	rot := mx.Concatenate([]*mx.Array{mx.Negative(p[1]), p[0], mx.Negative(p[3]), p[2]}, -1)
	cos, sin = mx.AsType(cos, x.DType()), mx.AsType(sin, x.DType())
	return mx.Add(mx.Multiply(x, cos), mx.Multiply(rot, sin))
}

// patchify cuts img into patch×patch squares in row-major patch order (index y·pW + x)
// and flattens each with feature order (row in patch, column in patch, channel), mapping
// a value x in [0, 1] to 2(x − 0.5). It returns the features [P·3·patch²] and each
// patch's (x, y).
func patchify(img *imageproc.Image, patch int) (feat []float32, xs, ys []int32) {
	pw, ph := img.Width/patch, img.Height/patch
	n := 3 * patch * patch
	feat = make([]float32, pw*ph*n)
	xs = make([]int32, pw*ph)
	ys = make([]int32, pw*ph)
	for py := range ph {
		for px := range pw {
			idx := py*pw + px
			xs[idx], ys[idx] = int32(px), int32(py)
			f := feat[idx*n : (idx+1)*n]
			for r := range patch {
				for c := range patch {
					for ch := range 3 {
						f[(r*patch+c)*3+ch] = 2 * (img.At(ch, py*patch+r, px*patch+c) - 0.5)
					}
				}
			}
		}
	}
	return feat, xs, ys
}

// checkImage reports why img cannot go through the tower.
func (v *VisionTower) checkImage(img *imageproc.Image) error {
	c := v.Config
	side := c.PatchSize * c.PoolingKernelSize
	switch {
	case img == nil || img.Height <= 0 || img.Width <= 0:
		return fmt.Errorf("diffusiongemma: vision: empty image")
	case len(img.Pixels) != 3*img.Height*img.Width:
		return fmt.Errorf("diffusiongemma: vision: image %d×%d has %d values, want 3·%d·%d = %d",
			img.Height, img.Width, len(img.Pixels), img.Height, img.Width, 3*img.Height*img.Width)
	case img.Height%side != 0 || img.Width%side != 0:
		return fmt.Errorf("diffusiongemma: vision: image %d×%d: both sides must be multiples of patch_size·pooling_kernel_size = %d (preprocess it with ImageOptions)",
			img.Height, img.Width, side)
	}
	if n := max(img.Height, img.Width) / c.PatchSize; n > c.PositionEmbeddingSize {
		return fmt.Errorf("diffusiongemma: vision: image %d×%d has %d patches along a side, beyond position_embedding_size %d",
			img.Height, img.Width, n, c.PositionEmbeddingSize)
	}
	return nil
}

// Hidden runs the tower up to the standardized pooled features [n_soft, hidden], before
// embed_vision.
func (v *VisionTower) Hidden(img *imageproc.Image) (*mx.Array, error) {
	if err := v.checkImage(img); err != nil {
		return nil, err
	}
	c := v.Config
	e := v.PosTable.Engine()
	dt := v.PosTable.DType()
	feat, xs, ys := patchify(img, c.PatchSize)
	np := len(xs)
	// The patches are cast to the activation dtype: the reference casts them to the input
	// projection's weight dtype, which for a quantized linear is uint32 and truncates every
	// input to an integer (§3.9). That quirk is deliberately not reproduced.
	x := mx.AsType(mx.FromFloat32(e, feat, 1, np, 3*c.PatchSize*c.PatchSize), dt)
	h := v.InputProj.Forward(x)
	tx := mx.Reshape(mx.SliceAxis(v.PosTable, 0, 0, 1), c.PositionEmbeddingSize, c.HiddenSize)
	ty := mx.Reshape(mx.SliceAxis(v.PosTable, 0, 1, 2), c.PositionEmbeddingSize, c.HiddenSize)
	pos := mx.Add(mx.Take(tx, mx.FromInt32(e, xs, np), 0), mx.Take(ty, mx.FromInt32(e, ys, np), 0))
	h = mx.Add(h, mx.ExpandDims(pos, 0))

	cos, sin := ropeTables(e, xs, ys, v.ropeInv, c.HeadDim)
	for _, l := range v.Layers {
		h = l.forward(h, cos, sin, v.eps())
	}
	pooled := poolPatches(h, img.Height/c.PatchSize, img.Width/c.PatchSize, c.PoolingKernelSize)
	pooled = mx.MulScalar(pooled, math.Sqrt(float64(c.HiddenSize)))
	if v.StdBias != nil {
		pooled = mx.Multiply(mx.Subtract(pooled, v.StdBias), v.StdScale)
	}
	return pooled, nil
}

// Features returns the image's soft-token embeddings [n_soft, text hidden]:
// embed_vision(tower(img)) = projection(RMSNormNoScale(Hidden(img))). They replace the
// image tokens' embeddings as they are, without the text embed scale.
func (v *VisionTower) Features(img *imageproc.Image) (*mx.Array, error) {
	h, err := v.Hidden(img)
	if err != nil {
		return nil, err
	}
	return v.Projection.Forward(mx.RMSNorm(h, nil, v.eps())), nil
}

// poolPatches averages each k×k window of the ph×pw patch grid: h [1, ph·pw, D] with patch
// index y·pw + x → [ph/k · pw/k, D], window (Y, X) at row Y·(pw/k) + X. This is the
// reference's position-grouped pooling, whose group of patch (x, y) is
// ⌊x/k⌋ + (pw/k)·⌊y/k⌋.
func poolPatches(h *mx.Array, ph, pw, k int) *mx.Array {
	d := h.Dim(-1)
	g := mx.Reshape(h, ph/k, k, pw/k, k, d)
	g = mx.DivScalar(mx.Sum(g, false, 1, 3), float64(k*k))
	return mx.Reshape(g, (ph/k)*(pw/k), d)
}

// forward is one block: h = x + post_attn(attn(input_norm(x))); h + post_ff(mlp(pre_ff(h))).
func (l *VisionLayer) forward(x, cos, sin *mx.Array, eps float64) *mx.Array {
	h := mx.Add(x, mx.RMSNorm(l.attention(mx.RMSNorm(x, l.InputNorm, eps), cos, sin, eps), l.PostAttnNorm, eps))
	u := mx.RMSNorm(h, l.PreFFNorm, eps)
	mlp := l.Down.Forward(mx.Multiply(mx.GELUTanh(l.Gate.Forward(u)), l.Up.Forward(u)))
	return mx.Add(h, mx.RMSNorm(mlp, l.PostFFNorm, eps))
}

// attention is bidirectional over every patch (all are real: the tower never pads), with
// q/k RMSNorm with weight, v RMSNorm without, 2-D RoPE on q and k, scale 1.
func (l *VisionLayer) attention(x, cos, sin *mx.Array, eps float64) *mx.Array {
	b, s := x.Dim(0), x.Dim(1)
	q := rope2D(mx.RMSNorm(mx.Reshape(l.Q.Forward(x), b, s, l.Heads, l.HeadDim), l.QNorm, eps), cos, sin)
	k := rope2D(mx.RMSNorm(mx.Reshape(l.K.Forward(x), b, s, l.KVHeads, l.HeadDim), l.KNorm, eps), cos, sin)
	v := mx.RMSNorm(mx.Reshape(l.V.Forward(x), b, s, l.KVHeads, l.HeadDim), nil, eps)
	t := func(a *mx.Array) *mx.Array { return mx.Transpose(a, 0, 2, 1, 3) }
	out := mx.ScaledDotProductAttention(t(q), t(k), t(v), 1.0, nil)
	return l.O.Forward(mx.Reshape(t(out), b, s, l.Heads*l.HeadDim))
}
