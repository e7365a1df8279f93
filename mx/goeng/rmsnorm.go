package goeng

// The rms_norm row loops: the Go code defines every value, and the AVX2 kernels (where
// built) take the leading multiples of 4 or 8 with the same operations in the same order —
// float64 partial sums over i mod 4 as the four lanes of one register, no fused
// multiply-adds — so the bits are the same with or without them.

// dot4 is Σ a[i]·b[i] in float64, as four partial sums over i mod 4 added pairwise at
// the end; len(b) ≥ len(a).
func dot4(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	if n4 := len(a) / 4 * 4; rmsAVX2 && n4 > 0 {
		var sums [4]float64
		dotPD(&a[0], &b[0], n4, &sums)
		s0, s1, s2, s3 = sums[0], sums[1], sums[2], sums[3]
		i = n4
	}
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += float64(x[0]) * float64(y[0])
		s1 += float64(x[1]) * float64(y[1])
		s2 += float64(x[2]) * float64(y[2])
		s3 += float64(x[3]) * float64(y[3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4w is Σ (g[i]·w[i])·x[i] in float64, in dot4's partial sums.
func dot4w(g, w, x []float32) float64 {
	w, x = w[:len(g)], x[:len(g)]
	var s0, s1, s2, s3 float64
	i := 0
	if n4 := len(g) / 4 * 4; rmsAVX2 && n4 > 0 {
		var sums [4]float64
		dot3PD(&g[0], &w[0], &x[0], n4, &sums)
		s0, s1, s2, s3 = sums[0], sums[1], sums[2], sums[3]
		i = n4
	}
	for ; i+4 <= len(g); i += 4 {
		g4, w4, x4 := g[i:i+4:i+4], w[i:i+4:i+4], x[i:i+4:i+4]
		s0 += float64(g4[0]) * float64(w4[0]) * float64(x4[0])
		s1 += float64(g4[1]) * float64(w4[1]) * float64(x4[1])
		s2 += float64(g4[2]) * float64(w4[2]) * float64(x4[2])
		s3 += float64(g4[3]) * float64(w4[3]) * float64(x4[3])
	}
	for ; i < len(g); i++ {
		s0 += float64(g[i]) * float64(w[i]) * float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// rmsScaleRow sets dst[i] = x[i]·inv, times w[i] when w is set, in float32.
func rmsScaleRow(dst, x, w []float32, inv float32) {
	x = x[:len(dst)]
	i := 0
	if n8 := len(dst) / 8 * 8; rmsAVX2 && w != nil && n8 > 0 {
		_ = w[n8-1]
		rmsScaleW(&dst[0], &x[0], &w[0], inv, n8)
		i = n8
	}
	for ; i < len(dst); i++ {
		y := x[i] * inv
		if w != nil {
			y *= w[i]
		}
		dst[i] = y
	}
}

// rmsGradRow sets dst[i] = float32(ir·gw − x[i]·c) with gw = g[i]·w[i] (g[i] without w),
// in float64: rms_norm's dx for one row.
func rmsGradRow(dst, g, w, x []float32, ir, c float64) {
	g, x = g[:len(dst)], x[:len(dst)]
	i := 0
	if n4 := len(dst) / 4 * 4; rmsAVX2 && w != nil && n4 > 0 {
		_ = w[n4-1]
		rmsGradW(&dst[0], &g[0], &w[0], &x[0], ir, c, n4)
		i = n4
	}
	for ; i < len(dst); i++ {
		gw := float64(g[i])
		if w != nil {
			gw *= float64(w[i])
		}
		dst[i] = float32(ir*gw - float64(x[i])*c)
	}
}
