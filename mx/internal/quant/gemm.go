package quant

import "github.com/dgtune/dgtune/mx/internal/sgemm"

// gemmMinRows is the number of rows of x from which a product goes through
// sgemm.GemmPacked, decoding the weight block by block into the micro-kernel's
// B panels, instead of the kernels that decode codes next to the dot products.
// Decoding costs about the same per weight either way; sgemm then reuses each
// decoded weight across a block of rows held in registers. BenchmarkGemmThreshold
// on one AVX2 core, K = 512, N = 1024 (GFLOP/s, few-row kernels vs GemmPacked,
// for x·Wᵀ and x·W): 4-bit M = 2: 6.4 vs 5.2, 5.9 vs 5.5; M = 3: 5.7 vs 8.0,
// 6.8 vs 8.4; M = 4: 6.4 vs 10.7, 7.3 vs 11.2; M = 32: 7.6 vs 48.5, 9.0 vs 48.6.
// 3-bit M = 2: 2.3 vs 2.0, 2.5 vs 2.5; M = 3: 1.9 vs 3.0, 3.3 vs 3.7.
const gemmMinRows = 3

const pw = sgemm.PanelWidth

// packT is a sgemm.PackFunc presenting op(B) = Wᵀ for W[N, K] quantized along K
// (x·Wᵀ): panel column j of k-row p is W[j0+j, pc+p]. Each row of W is decoded
// group by group and written down its panel column.
//
// sgemm starts every k-block but the last on a multiple of KBlock and ends the
// last at K; both are multiples of 32, as are group starts, so every run decoded
// here starts on a whole word of the bit stream and is a multiple of 32 codes.
func (w qmat) packT(dst []float32, pc, kb, j0, nt int) {
	if bits := w.p.Bits; bits == 4 || bits == 8 {
		w.packT8x8(dst, pc, kb, j0, nt)
		return
	}
	w.packTRows(dst, pc, kb, j0, nt)
}

// packTRows is packT one row of W at a time, each decoded group by group down its
// panel column.
func (w qmat) packTRows(dst []float32, pc, kb, j0, nt int) {
	gs, bits := w.p.GroupSize, w.p.Bits
	var code [128]float32
	for jr := 0; jr < nt; jr += pw {
		panel := dst[jr*kb : (jr+pw)*kb]
		nn := min(pw, nt-jr)
		if nn < pw {
			clear(panel)
		}
		for j := range nn {
			words, s, b := w.row(j0 + jr + j)
			for p0 := pc; p0 < pc+kb; {
				g := p0 / gs
				p1 := min((g+1)*gs, pc+kb)
				n := p1 - p0
				out := panel[(p0-pc)*pw+j:]
				out = out[:(n-1)*pw+1]
				ws := words[p0*bits/32:]
				sg, bg := s[g], b[g]
				switch bits {
				case 4:
					// The 16 values a code can take in this group, so that each code
					// costs a load instead of a multiply-add.
					var tab [16]float32
					for c := range tab {
						tab[c] = sg*float32(c) + bg
					}
					ws = ws[:n/8]
					for i, wd := range ws {
						o := out[i*8*pw:]
						o = o[:7*pw+1]
						o[0], o[pw], o[2*pw], o[3*pw] = tab[wd&15], tab[wd>>4&15], tab[wd>>8&15], tab[wd>>12&15]
						o[4*pw], o[5*pw], o[6*pw], o[7*pw] = tab[wd>>16&15], tab[wd>>20&15], tab[wd>>24&15], tab[wd>>28]
					}
				case 8:
					ws = ws[:n/4]
					for i, wd := range ws {
						o := out[i*4*pw:]
						o = o[:3*pw+1]
						o[0], o[pw] = sg*bytes8[wd&255]+bg, sg*bytes8[wd>>8&255]+bg
						o[2*pw], o[3*pw] = sg*bytes8[wd>>16&255]+bg, sg*bytes8[wd>>24]+bg
					}
				default:
					c := code[:n]
					decodeCodes(c, ws, bits)
					for i, q := range c {
						out[i*pw] = sg*q + bg
					}
				}
				p0 = p1
			}
		}
	}
}

// packT8x8 is packT for 4- and 8-bit codes: blocks of eight rows of W by eight codes
// (one or two words per row, always inside one group) are decoded and transposed into
// the panel together by decodeT8x8, so the panel is written a row of eight at a time
// instead of one strided element at a time. Rows past the last multiple of eight go
// through packT's per-row path. The values are packT's.
func (w qmat) packT8x8(dst []float32, pc, kb, j0, nt int) {
	gs, bits := w.p.GroupSize, w.p.Bits
	var sc, bi [8]float32
	for jr := 0; jr < nt; jr += pw {
		panel := dst[jr*kb : (jr+pw)*kb]
		nn := min(pw, nt-jr)
		if nn < pw {
			clear(panel)
		}
		if nn == pw {
			// A whole panel: its sixteen rows at once, one call per group. The next
			// panel's scales and biases are hinted first: each of its rows' sits on a line
			// of its own, and a weight's streams from memory (on the device's Xeon this
			// loop's loads of them took longer than the decoding).
			hintRows(w.scales, w.ng, j0+jr+pw, pw, pc/gs)
			hintRows(w.biases, w.ng, j0+jr+pw, pw, pc/gs)
			var sc16, bi16 [pw]float32
			for p := 0; p < kb; {
				k := pc + p
				g := k / gs
				r0 := j0 + jr
				for i := range pw {
					sc16[i], bi16[i] = w.scales[(r0+i)*w.ng+g], w.biases[(r0+i)*w.ng+g]
				}
				n := (min((g+1)*gs, pc+kb) - k) / 8
				decodeT16Run(bits, w.packed[r0*w.wpr+k*bits/32:], w.wpr, &sc16, &bi16, panel[p*pw:], pw, n)
				p += 8 * n
			}
			continue
		}
		n8 := nn / 8 * 8
		for jb := 0; jb < n8; jb += 8 {
			r0 := j0 + jr + jb
			// One call per group: its blocks share the eight rows' scales.
			for p := 0; p < kb; {
				k := pc + p
				g := k / gs
				for i := range 8 {
					sc[i], bi[i] = w.scales[(r0+i)*w.ng+g], w.biases[(r0+i)*w.ng+g]
				}
				n := (min((g+1)*gs, pc+kb) - k) / 8
				decodeT8x8Run(bits, w.packed[r0*w.wpr+k*bits/32:], w.wpr, &sc, &bi, panel[p*pw+jb:], pw, n)
				p += 8 * n
			}
		}
		if n8 < nn {
			// The last rows, fewer than eight: a panel of their own through packT's
			// per-row path, copied into place.
			var tmp [pw * sgemm.KBlockMax]float32
			part := tmp[:pw*kb]
			w.packTRows(part, pc, kb, j0+jr+n8, nn-n8)
			for p := range kb {
				copy(panel[p*pw+n8:p*pw+nn], part[p*pw:p*pw+nn-n8])
			}
		}
	}
}

// packN is a sgemm.PackFunc presenting op(B) = W for W[K, N] quantized along N
// (x·W): k-row p of a panel is W[pc+p, c:c+16] for the panel's first column c.
// A panel row lies inside one group whenever c is a multiple of the panel width
// (groups are multiples of it), which is how sgemm cuts columns; any other start
// takes a per-element path.
func (w qmat) packN(dst []float32, pc, kb, j0, nt int) {
	gs, bits := w.p.GroupSize, w.p.Bits
	if (bits == 4 || bits == 8) && j0%pw == 0 && j0+(nt+pw-1)/pw*pw <= w.cols {
		w.packN16(dst, pc, kb, j0, nt)
		return
	}
	for jr := 0; jr < nt; jr += pw {
		panel := dst[jr*kb : (jr+pw)*kb]
		c := j0 + jr
		nn := min(pw, nt-jr)
		if c%pw != 0 || c+pw > w.cols {
			w.packNSlow(panel, pc, kb, c, nn)
			continue
		}
		g := c / gs
		for p := range kb {
			r := pc + p
			sg, bg := w.scales[r*w.ng+g], w.biases[r*w.ng+g]
			words := w.packed[r*w.wpr : (r+1)*w.wpr]
			d := (*[pw]float32)(panel[p*pw : (p+1)*pw])
			switch bits {
			case 4:
				ws := (*[2]uint32)(words[c/8 : c/8+2])
				for h, wd := range ws {
					l0, l1, l2, l3 := &nibbles[wd&255], &nibbles[wd>>8&255], &nibbles[wd>>16&255], &nibbles[wd>>24]
					o := (*[8]float32)(d[h*8 : h*8+8])
					o[0], o[1], o[2], o[3] = sg*l0[0]+bg, sg*l0[1]+bg, sg*l1[0]+bg, sg*l1[1]+bg
					o[4], o[5], o[6], o[7] = sg*l2[0]+bg, sg*l2[1]+bg, sg*l3[0]+bg, sg*l3[1]+bg
				}
			case 8:
				ws := (*[4]uint32)(words[c/4 : c/4+4])
				for h, wd := range ws {
					o := (*[4]float32)(d[h*4 : h*4+4])
					o[0], o[1] = sg*bytes8[wd&255]+bg, sg*bytes8[wd>>8&255]+bg
					o[2], o[3] = sg*bytes8[wd>>16&255]+bg, sg*bytes8[wd>>24]+bg
				}
			default:
				decodeAt(d[:], words, c*bits, bits)
				for i, q := range d {
					d[i] = sg*q + bg
				}
			}
			if nn < pw {
				clear(d[nn:])
			}
		}
	}
}

// packN16 is packN for 4- and 8-bit codes and whole panels that start on a multiple of
// the panel width: row by row, the panels of one group are decoded by one decodeN16 call
// (with AVX2, eight codes per instruction sequence). The values are packN4's.
func (w qmat) packN16(dst []float32, pc, kb, j0, nt int) {
	gs, bits := w.p.GroupSize, w.p.Bits
	np := (nt + pw - 1) / pw
	stride := kb * pw
	// One call per group of panels, over all kb rows: a row's panels in one group share
	// its scale.
	for q := 0; q < np; {
		c := j0 + q*pw
		g := c / gs
		n := min(np-q, ((g+1)*gs-c)/pw) // panels left in this group
		decodeN16Rows(bits, w.packed[pc*w.wpr+c*bits/32:], w.wpr, w.scales[pc*w.ng+g:], w.biases[pc*w.ng+g:], w.ng,
			dst[q*stride:], stride, n, kb)
		q += n
	}
	if nn := nt - (np-1)*pw; nn < pw {
		for p := range kb {
			clear(dst[(np-1)*stride+p*pw+nn : (np-1)*stride+p*pw+pw])
		}
	}
}

// packNSlow fills one panel of packN element by element, for a first column c
// that is not a multiple of the panel width or a panel that reaches past the row.
func (w qmat) packNSlow(panel []float32, pc, kb, c, nn int) {
	gs, bits := w.p.GroupSize, w.p.Bits
	clear(panel[:kb*pw])
	var q [1]float32
	for p := range kb {
		r := pc + p
		words := w.packed[r*w.wpr : (r+1)*w.wpr]
		for j := range nn {
			col := c + j
			decodeAt(q[:], words, col*bits, bits)
			g := r*w.ng + col/gs
			panel[p*pw+j] = w.scales[g]*q[0] + w.biases[g]
		}
	}
}

// decodeAt unpacks len(dst) codes starting at stream bit off, which need not
// fall on a word (3- and 5-bit codes do not pack 16 to a whole word count).
func decodeAt(dst []float32, words []uint32, off, bits int) {
	mask := uint64(1)<<bits - 1
	wi := off / 32
	acc := uint64(words[wi]) >> (off % 32)
	n := 32 - off%32
	wi++
	for j := range dst {
		if n < bits {
			acc |= uint64(words[wi]) << n
			wi++
			n += 32
		}
		dst[j] = float32(acc & mask)
		acc >>= bits
		n -= bits
	}
}

// gemmT is y[M, N] = x[M, K]·Wᵀ through sgemm with W decoded by packT.
func gemmT(y, x []float32, M int, w qmat) {
	sgemm.GemmPacked(sgemm.NoTrans, M, w.rows, w.cols, x, w.cols, w.packT, y, w.rows, false)
}

// gemmN is y[M, N] = x[M, K]·W through sgemm with W decoded by packN.
func gemmN(y, x []float32, M int, w qmat) {
	sgemm.GemmPacked(sgemm.NoTrans, M, w.cols, w.rows, x, w.rows, w.packN, y, w.cols, false)
}
