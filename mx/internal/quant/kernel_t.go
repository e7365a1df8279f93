package quant

// tileN is how many rows of W[N, K] the transposed kernel dequantizes at a
// time; it matches the width of the dot2x4/dot1x4 register blocks.
const tileN = 4

// useTile reports whether M rows of x amortise dequantizing tiles of W
// better than decoding codes in registers for every pair of rows. Measured
// on one core at K = N = 1024 (GFLOP/s, fused vs tile): 4-bit, M = 4: 6.2
// vs 4.8; M = 8: about 6.2 either way; the tile reaches 7.8 at M = 256.
// 3-bit codes have no lookup-table decoding: M = 4: 2.2 vs 3.4.
func useTile(M, bits int) bool {
	if bits == 4 || bits == 8 {
		return M >= 8
	}
	return M >= 4
}

// mmT computes y[m, n] = x[m, :]·W[n, :] for n in [n0, n1) and every m.
// y has row stride w.rows (N) and x row stride w.cols (K).
//
// A few rows of x cannot amortise dequantization, so they take the fused
// path: codes are decoded in registers and dotted with one or two rows of x
// group by group, using Σ x·(s·q + b) = s·Σ x·q + b·Σ x. More rows amortise
// it: a tile of tileN rows of W is dequantized once into scratch and dotted
// with every row of x, two rows of x at a time so each loaded weight feeds
// two sums.
func mmT(y, x []float32, M int, w qmat, n0, n1 int, sc *scratch) {
	N, K := w.rows, w.cols
	if !useTile(M, w.p.Bits) {
		gs := w.p.GroupSize
		xsum := sc.floats(M * w.ng)
		for g := range xsum {
			xsum[g] = sum(x[g*gs : (g+1)*gs]) // x rows are contiguous, so g spans rows
		}
		m := 0
		for ; m+1 < M; m += 2 {
			x0, x1 := x[m*K:(m+1)*K], x[(m+1)*K:(m+2)*K]
			s0, s1 := xsum[m*w.ng:(m+1)*w.ng], xsum[(m+1)*w.ng:(m+2)*w.ng]
			for n := n0; n < n1; n++ {
				y[m*N+n], y[(m+1)*N+n] = rowDot2(x0, x1, s0, s1, w, n, &sc.code)
			}
		}
		if m < M {
			x0, s0 := x[m*K:(m+1)*K], xsum[m*w.ng:(m+1)*w.ng]
			for n := n0; n < n1; n++ {
				y[m*N+n] = rowDot(x0, s0, w, n, &sc.code)
			}
		}
		return
	}
	tile := sc.floats(tileN * K)
	for n := n0; n < n1; n += tileN {
		nb := min(tileN, n1-n)
		for t := range nb {
			words, s, b := w.row(n + t)
			dequantizeRow(tile[t*K:(t+1)*K], words, s, b, w.p)
		}
		if nb < tileN {
			for t := range nb {
				wt := tile[t*K : (t+1)*K]
				for m := range M {
					y[m*N+n+t] = dot(x[m*K:(m+1)*K], wt)
				}
			}
			continue
		}
		w0, w1, w2, w3 := tile[:K], tile[K:2*K], tile[2*K:3*K], tile[3*K:4*K]
		m := 0
		for ; m+1 < M; m += 2 {
			r := dot2x4(x[m*K:(m+1)*K], x[(m+1)*K:(m+2)*K], w0, w1, w2, w3)
			copy(y[m*N+n:m*N+n+4], r[:4])
			copy(y[(m+1)*N+n:(m+1)*N+n+4], r[4:])
		}
		if m < M {
			r := dot1x4(x[m*K:(m+1)*K], w0, w1, w2, w3)
			copy(y[m*N+n:m*N+n+4], r[:])
		}
	}
}

// rowDot is x·W[n, :] decoded on the fly; xsum holds x's per-group sums.
func rowDot(x, xsum []float32, w qmat, n int, code *[128]float32) float32 {
	words, s, b := w.row(n)
	gs, bits := w.p.GroupSize, w.p.Bits
	wpg := gs * bits / 32
	var acc float32
	for g := range xsum {
		xg, wg := x[g*gs:(g+1)*gs], words[g*wpg:(g+1)*wpg]
		var d float32
		switch bits {
		case 4:
			d = dot4(wg, xg)
		case 8:
			d = dot8(wg, xg)
		default:
			c := code[:gs]
			decodeCodes(c, wg, bits)
			d = dot(xg, c)
		}
		acc += s[g]*d + b[g]*xsum[g]
	}
	return acc
}

// rowDot2 is rowDot for two rows of x sharing each decoded code.
func rowDot2(x0, x1, xsum0, xsum1 []float32, w qmat, n int, code *[128]float32) (float32, float32) {
	words, s, b := w.row(n)
	gs, bits := w.p.GroupSize, w.p.Bits
	wpg := gs * bits / 32
	xsum1 = xsum1[:len(xsum0)]
	var acc0, acc1 float32
	for g := range xsum0 {
		x0g, x1g, wg := x0[g*gs:(g+1)*gs], x1[g*gs:(g+1)*gs], words[g*wpg:(g+1)*wpg]
		var d0, d1 float32
		switch bits {
		case 4:
			d0, d1 = dot4x2(wg, x0g, x1g)
		case 8:
			d0, d1 = dot8x2(wg, x0g, x1g)
		default:
			c := code[:gs]
			decodeCodes(c, wg, bits)
			d0, d1 = dot(x0g, c), dot(x1g, c)
		}
		acc0 += s[g]*d0 + b[g]*xsum0[g]
		acc1 += s[g]*d1 + b[g]*xsum1[g]
	}
	return acc0, acc1
}

// dot4 is Σ x[j]·q[j] over the 4-bit codes in words.
func dot4(words []uint32, x []float32) float32 {
	x = x[:len(words)*8]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := (*[8]float32)(x[i*8 : i*8+8])
		l0, l1, l2, l3 := &nibbles[w&255], &nibbles[w>>8&255], &nibbles[w>>16&255], &nibbles[w>>24]
		a0 += xx[0]*l0[0] + xx[1]*l0[1]
		a1 += xx[2]*l1[0] + xx[3]*l1[1]
		a2 += xx[4]*l2[0] + xx[5]*l2[1]
		a3 += xx[6]*l3[0] + xx[7]*l3[1]
	}
	return (a0 + a1) + (a2 + a3)
}

// dot8 is Σ x[j]·q[j] over the 8-bit codes in words.
func dot8(words []uint32, x []float32) float32 {
	x = x[:len(words)*4]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := (*[4]float32)(x[i*4 : i*4+4])
		a0 += xx[0] * bytes8[w&255]
		a1 += xx[1] * bytes8[w>>8&255]
		a2 += xx[2] * bytes8[w>>16&255]
		a3 += xx[3] * bytes8[w>>24]
	}
	return (a0 + a1) + (a2 + a3)
}

// dot4x2 is dot4 for two vectors x0, x1 at once.
func dot4x2(words []uint32, x0, x1 []float32) (float32, float32) {
	x0, x1 = x0[:len(words)*8], x1[:len(words)*8]
	var a0, a1, b0, b1 float32
	for i, w := range words {
		xa, xb := (*[8]float32)(x0[i*8:i*8+8]), (*[8]float32)(x1[i*8:i*8+8])
		l := &nibbles[w&255]
		a0 += xa[0]*l[0] + xa[1]*l[1]
		b0 += xb[0]*l[0] + xb[1]*l[1]
		l = &nibbles[w>>8&255]
		a1 += xa[2]*l[0] + xa[3]*l[1]
		b1 += xb[2]*l[0] + xb[3]*l[1]
		l = &nibbles[w>>16&255]
		a0 += xa[4]*l[0] + xa[5]*l[1]
		b0 += xb[4]*l[0] + xb[5]*l[1]
		l = &nibbles[w>>24]
		a1 += xa[6]*l[0] + xa[7]*l[1]
		b1 += xb[6]*l[0] + xb[7]*l[1]
	}
	return a0 + a1, b0 + b1
}

// dot8x2 is dot8 for two vectors x0, x1 at once.
func dot8x2(words []uint32, x0, x1 []float32) (float32, float32) {
	x0, x1 = x0[:len(words)*4], x1[:len(words)*4]
	var a0, a1, b0, b1 float32
	for i, w := range words {
		xa, xb := (*[4]float32)(x0[i*4:i*4+4]), (*[4]float32)(x1[i*4:i*4+4])
		q0, q1, q2, q3 := bytes8[w&255], bytes8[w>>8&255], bytes8[w>>16&255], bytes8[w>>24]
		a0 += xa[0]*q0 + xa[2]*q2
		a1 += xa[1]*q1 + xa[3]*q3
		b0 += xb[0]*q0 + xb[2]*q2
		b1 += xb[1]*q1 + xb[3]*q3
	}
	return a0 + a1, b0 + b1
}

func sum(x []float32) float32 {
	var a0, a1, a2, a3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xx := x[i : i+4 : i+4]
		a0 += xx[0]
		a1 += xx[1]
		a2 += xx[2]
		a3 += xx[3]
	}
	for ; i < len(x); i++ {
		a0 += x[i]
	}
	return (a0 + a1) + (a2 + a3)
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		aa, bb := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot1x4 is one row of x against four rows of W.
func dot1x4(x, w0, w1, w2, w3 []float32) [4]float32 {
	w0, w1, w2, w3 = w0[:len(x)], w1[:len(x)], w2[:len(x)], w3[:len(x)]
	var s0, s1, s2, s3 float32
	for i, a := range x {
		s0 += a * w0[i]
		s1 += a * w1[i]
		s2 += a * w2[i]
		s3 += a * w3[i]
	}
	return [4]float32{s0, s1, s2, s3}
}

// dot2x4 is two rows of x against four rows of W: eight accumulators and
// six loads per step fit the 16 SSE registers without spilling.
func dot2x4(x0, x1, w0, w1, w2, w3 []float32) [8]float32 {
	x1 = x1[:len(x0)]
	w0, w1, w2, w3 = w0[:len(x0)], w1[:len(x0)], w2[:len(x0)], w3[:len(x0)]
	var s00, s01, s02, s03, s10, s11, s12, s13 float32
	for i, a := range x0 {
		b := x1[i]
		c0, c1, c2, c3 := w0[i], w1[i], w2[i], w3[i]
		s00 += a * c0
		s01 += a * c1
		s02 += a * c2
		s03 += a * c3
		s10 += b * c0
		s11 += b * c1
		s12 += b * c2
		s13 += b * c3
	}
	return [8]float32{s00, s01, s02, s03, s10, s11, s12, s13}
}
