package sgemm

import "unsafe"

// packA copies rows i0..i0+mt of op(A), columns pc..pc+kb, into mr-row micro-panels:
// panel q holds dst[q·kb·mr + p·mr + i] = op(A)[i0 + q·mr + i, pc + p]. Rows past mt
// are zero so the kernel can always compute a full mr rows.
func packA(dst, a []float32, lda int, t Trans, i0, mt, pc, kb int) {
	for ir := 0; ir < mt; ir += mr {
		mm := min(mr, mt-ir)
		panel := dst[ir*kb : (ir+mr)*kb]
		if t {
			// op(A)[i, p] = a[p·lda + i]: each k step reads mm consecutive values.
			if mm == mr {
				// Three 8-byte words per k step: copy() (or an array assignment) would
				// call memmove for every 24 bytes, and element by element costs twice
				// the instructions. The bounds are checked once, for the last step.
				if kb == 0 {
					continue
				}
				_, _ = a[(pc+kb-1)*lda+i0+ir+mr-1], panel[kb*mr-1]
				src, dp := unsafe.Pointer(&a[pc*lda+i0+ir]), unsafe.Pointer(&panel[0])
				for p := range kb {
					s := (*[3]uint64)(unsafe.Add(src, 4*p*lda))
					d := (*[3]uint64)(unsafe.Add(dp, 4*p*mr))
					d[0], d[1], d[2] = s[0], s[1], s[2]
				}
				continue
			}
			for p := range kb {
				src := a[(pc+p)*lda+i0+ir:]
				d := panel[p*mr : p*mr+mr]
				copy(d, src[:mm])
				clear(d[mm:])
			}
			continue
		}
		if mm == mr {
			if kb == 0 {
				continue
			}
			// The bounds of the last row and the panel's end are checked once; the loop
			// reads the six rows through one pointer and a stride. Whole blocks of 8 k
			// steps go through the AVX2 transposing kernel where built (a copy: the same
			// values either way).
			_, _ = a[(i0+ir+mr-1)*lda+pc+kb-1], panel[kb*mr-1]
			src, dp, st := unsafe.Pointer(&a[(i0+ir)*lda+pc]), unsafe.Pointer(&panel[0]), uintptr(4*lda)
			start := 0
			if b8 := kb / 8; packAVX2 && b8 > 0 {
				packA6AVX2(&panel[0], &a[(i0+ir)*lda+pc], lda, b8)
				start = 8 * b8
			}
			for p := start; p < kb; p++ {
				s := unsafe.Add(src, 4*p)
				d := (*[mr]float32)(unsafe.Add(dp, 4*p*mr))
				d[0] = *(*float32)(s)
				d[1] = *(*float32)(unsafe.Add(s, st))
				d[2] = *(*float32)(unsafe.Add(s, 2*st))
				d[3] = *(*float32)(unsafe.Add(s, 3*st))
				d[4] = *(*float32)(unsafe.Add(s, 4*st))
				d[5] = *(*float32)(unsafe.Add(s, 5*st))
			}
			continue
		}
		clear(panel)
		for i := range mm {
			row := a[(i0+ir+i)*lda+pc:]
			row = row[:kb]
			for p, v := range row {
				panel[p*mr+i] = v
			}
		}
	}
}

// packB copies columns j0..j0+nt of op(B), rows pc..pc+kb, into nr-column
// micro-panels: panel q holds dst[q·kb·nr + p·nr + j] = op(B)[pc + p, j0 + q·nr + j],
// zero past nt.
func packB(dst, b []float32, ldb int, t Trans, pc, kb, j0, nt int) {
	if !t {
		packBRows(dst, b, ldb, pc, kb, j0, nt)
		return
	}
	p8 := kb / 8 * 8
	for jr := 0; jr < nt; jr += nr {
		nn := min(nr, nt-jr)
		panel := dst[jr*kb : (jr+nr)*kb]
		// op(B)[p, j] = b[j·ldb + p]: each stored row is one column of op(B). Whole 8×8
		// blocks go through Transpose8; the edges element by element.
		if nn < nr {
			clear(panel)
		}
		j8 := nn / 8 * 8
		for jb := 0; jb < j8 && p8 > 0; jb += 8 {
			// The k-block's p8/8 blocks in one call; the bounds of the last are checked.
			src := b[(j0+jr+jb)*ldb+pc:]
			_, _ = src[7*ldb+p8-1], panel[(p8-1)*nr+jb+7]
			transpose8Run(&src[0], ldb, &panel[jb], nr, p8/8)
		}
		for j := range nn {
			col := b[(j0+jr+j)*ldb+pc:]
			col = col[:kb]
			from := p8
			if j >= j8 {
				from = 0
			}
			for p := from; p < kb; p++ {
				panel[p*nr+j] = col[p]
			}
		}
	}
}

// packBRows is packB for an untransposed B. It copies eight rows at a time, panel by
// panel: each panel's eight 64-byte rows are written one after the other, and the eight
// source rows are read as eight streams side by side. Writing one source row across all
// panels at once instead (the order a row-major reader suggests) sends every store of a
// row to the same L1 set, as panels lie kb·64 bytes apart — a multiple of 4 KiB for the
// usual kb — and on a float32 weight streamed from memory (the backward pass's g·W)
// costs ~30 % of the product (384×512×2048 cold: 135–146 → 200–213 GFLOP/s on 2 cores).
// Where the CPU has AVX a whole group goes through packRows8AVX, 64 bytes per YMM pair:
// eight 8-byte moves per 64 bytes kept the load and store queues full while the weight
// streamed in (cold 512×512 weight, one core: 7.5 → 12.5 GB/s; the experts' g·W, 32
// products of 48 rows, 118–130 → 138–190 GFLOP/s on 2 cores).
//
// Not packing at all — the wide and edge kernels take B's row stride, so they can read
// whole panel pairs of an untransposed B where it lies — was 5–27 % faster for products
// of 48–192 rows on the development EPYC but 10–40 % slower on the device's Xeon, whose
// L1 sets a panel pair's lines 2–4 KiB apart share (session 25), so B is always packed.
func packBRows(dst, b []float32, ldb, pc, kb, j0, nt int) {
	full := nt / nr * nr
	if full > 0 && kb > 0 {
		_ = dst[(full-nr)*kb+(kb-1)*nr+nr-1] // the last panel row written below
		_ = b[(pc+kb-1)*ldb+j0+full-1]       // the last source element read
		src := unsafe.Pointer(&b[pc*ldb+j0])
		st := uintptr(4 * ldb)
		const group = 8
		for p0 := 0; p0 < kb; p0 += group {
			p1 := min(p0+group, kb)
			if packRowsAVX && p1-p0 == group {
				packRows8AVX(&b[(pc+p0)*ldb+j0], ldb, &dst[p0*nr], full/nr, kb*nr)
				continue
			}
			for jr := 0; jr < full; jr += nr {
				dp := unsafe.Pointer(&dst[jr*kb])
				for p := p0; p < p1; p++ {
					// Eight 8-byte words per panel row: a 64-byte array assignment
					// compiles to a memmove call, whose overhead is most of the cost at
					// this size. (Each row's address is formed afresh: a pointer stepped
					// past the last row would point outside b.)
					s := (*[8]uint64)(unsafe.Add(src, uintptr(4*jr)+uintptr(p)*st))
					d := (*[8]uint64)(unsafe.Add(dp, 4*p*nr))
					d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
				}
			}
		}
	}
	if full < nt {
		for p := range kb {
			row := b[(pc+p)*ldb+j0:]
			row = row[:nt]
			d := dst[full*kb+p*nr : full*kb+p*nr+nr]
			copy(d, row[full:])
			clear(d[nt-full:])
		}
	}
}
