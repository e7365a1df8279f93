package quant

// tileN is how many rows of W[N, K] the transposed kernel dequantizes at a
// time; it matches the width of the dot2x4/dot1x4 register blocks.
const tileN = 4

// mmT computes y[m, n] = x[m, :]·W[n, :] for n in [n0, n1) and every m.
// y has row stride w.rows (N) and x row stride w.cols (K).
//
// One row of x cannot amortise decoding, so it takes the fused path: codes
// are decoded in registers and dotted with x group by group, using
// Σ x·(s·q + b) = s·Σ x·q + b·Σ x. Several rows amortise it: a tile of
// tileN rows of W is dequantized once into scratch and dotted with every
// row of x, two rows of x at a time so each loaded weight feeds two sums.
func mmT(y, x []float32, M int, w qmat, n0, n1 int, sc *scratch) {
	N, K := w.rows, w.cols
	if M == 1 {
		xsum := sc.floats(w.ng)
		gs := w.p.GroupSize
		for g := range xsum {
			xsum[g] = sum(x[g*gs : (g+1)*gs])
		}
		for n := n0; n < n1; n++ {
			y[n] = rowDot(x[:K], xsum, w, n, &sc.code)
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

// dot4 is Σ x[j]·q[j] over the 4-bit codes in words.
func dot4(words []uint32, x []float32) float32 {
	x = x[:len(words)*8]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := x[i*8 : i*8+8 : i*8+8]
		a0 += xx[0]*float32(w&15) + xx[4]*float32(w>>16&15)
		a1 += xx[1]*float32(w>>4&15) + xx[5]*float32(w>>20&15)
		a2 += xx[2]*float32(w>>8&15) + xx[6]*float32(w>>24&15)
		a3 += xx[3]*float32(w>>12&15) + xx[7]*float32(w>>28)
	}
	return (a0 + a1) + (a2 + a3)
}

// dot8 is Σ x[j]·q[j] over the 8-bit codes in words.
func dot8(words []uint32, x []float32) float32 {
	x = x[:len(words)*4]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := x[i*4 : i*4+4 : i*4+4]
		a0 += xx[0] * float32(w&255)
		a1 += xx[1] * float32(w>>8&255)
		a2 += xx[2] * float32(w>>16&255)
		a3 += xx[3] * float32(w>>24)
	}
	return (a0 + a1) + (a2 + a3)
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
