package quant

// yBlockFloats bounds the block of y (M rows × block columns, 32 KiB) that
// mm updates for every four rows of W, so that it stays in L1. Measured on
// one core: ~8.5 GFLOP/s from M = 16 to 256; 4× larger blocks lose half of
// that at M = 4 to L2 traffic. A transposed, dequantized tile fed to the
// 2×4 dot kernel (as in MatmulT) measured slower than this at every M.
const yBlockFloats = 8 << 10

// mm computes y[:, c0:c1] = x·W[:, c0:c1] for W[K, N] quantized along N
// (c0, c1 multiples of the group size); y has row stride N, x row stride K.
func mm(y, x []float32, M int, w qmat, c0, c1 int, sc *scratch) {
	gs := w.p.GroupSize
	nc := max(gs, yBlockFloats/M/gs*gs)
	for c := c0; c < c1; c += nc {
		mmBlock(y, x, M, w, c, min(c+nc, c1), sc)
	}
}

// mmBlock computes one column block of mm.
//
// Walking K four rows at a time, it decodes the codes of W[k..k+3, c0:c1]
// once and adds them into every row of y with coefficients x[m, k]·s[k, g].
// The bias part Σ_k x[m, k]·b[k, g] is the same for all columns of a group,
// so it is accumulated per (m, g) and added once at the end.
func mmBlock(y, x []float32, M int, w qmat, c0, c1 int, sc *scratch) {
	K, N := w.rows, w.cols
	gs, bits := w.p.GroupSize, w.p.Bits
	wpg := gs * bits / 32
	nc, g0 := c1-c0, c0/gs
	ngc := nc / gs
	buf := sc.floats(4*nc + M*ngc)
	q0, q1, q2, q3 := buf[:nc], buf[nc:2*nc], buf[2*nc:3*nc], buf[3*nc:4*nc]
	bacc := buf[4*nc:]
	clear(bacc)
	for m := range M {
		clear(y[m*N+c0 : m*N+c1])
	}
	decode := func(dst []float32, k int) {
		words := w.packed[k*w.wpr+g0*wpg : k*w.wpr+(g0+ngc)*wpg]
		for g := range ngc {
			decodeCodes(dst[g*gs:(g+1)*gs], words[g*wpg:(g+1)*wpg], bits)
		}
	}
	k := 0
	for ; k+4 <= K; k += 4 {
		decode(q0, k)
		decode(q1, k+1)
		decode(q2, k+2)
		decode(q3, k+3)
		s0, s1 := w.scales[k*w.ng+g0:][:ngc], w.scales[(k+1)*w.ng+g0:][:ngc]
		s2, s3 := w.scales[(k+2)*w.ng+g0:][:ngc], w.scales[(k+3)*w.ng+g0:][:ngc]
		b0, b1 := w.biases[k*w.ng+g0:][:ngc], w.biases[(k+1)*w.ng+g0:][:ngc]
		b2, b3 := w.biases[(k+2)*w.ng+g0:][:ngc], w.biases[(k+3)*w.ng+g0:][:ngc]
		for m := range M {
			xs := x[m*K+k : m*K+k+4 : m*K+k+4]
			x0, x1, x2, x3 := xs[0], xs[1], xs[2], xs[3]
			if x0 == 0 && x1 == 0 && x2 == 0 && x3 == 0 {
				continue // sparse rows (one-hot, masked) cost nothing
			}
			yr := y[m*N+c0 : m*N+c1]
			ba := bacc[m*ngc : (m+1)*ngc]
			for g := range ngc {
				ba[g] += x0*b0[g] + x1*b1[g] + x2*b2[g] + x3*b3[g]
				axpy4(yr[g*gs:(g+1)*gs], x0*s0[g], x1*s1[g], x2*s2[g], x3*s3[g],
					q0[g*gs:], q1[g*gs:], q2[g*gs:], q3[g*gs:])
			}
		}
	}
	for ; k < K; k++ {
		decode(q0, k)
		s0, b0 := w.scales[k*w.ng+g0:][:ngc], w.biases[k*w.ng+g0:][:ngc]
		for m := range M {
			x0 := x[m*K+k]
			if x0 == 0 {
				continue
			}
			yr := y[m*N+c0 : m*N+c1]
			ba := bacc[m*ngc : (m+1)*ngc]
			for g := range ngc {
				ba[g] += x0 * b0[g]
				a := x0 * s0[g]
				yg, qg := yr[g*gs:(g+1)*gs], q0[g*gs:(g+1)*gs]
				for j := range yg {
					yg[j] += a * qg[j]
				}
			}
		}
	}
	for m := range M {
		yr := y[m*N+c0 : m*N+c1]
		for g, b := range bacc[m*ngc : (m+1)*ngc] {
			yg := yr[g*gs : (g+1)*gs]
			for j := range yg {
				yg[j] += b
			}
		}
	}
}

// axpy4 is y += a0·q0 + a1·q1 + a2·q2 + a3·q3 over len(y) elements.
func axpy4(y []float32, a0, a1, a2, a3 float32, q0, q1, q2, q3 []float32) {
	q0, q1, q2, q3 = q0[:len(y)], q1[:len(y)], q2[:len(y)], q3[:len(y)]
	for j := range y {
		y[j] += a0*q0[j] + a1*q1[j] + a2*q2[j] + a3*q3[j]
	}
}
