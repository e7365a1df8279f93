package sgemm

// goKernels is the portable kernel set.
func goKernels() kernels { return kernels{tile6x16: kernelGo, row: rowGo} }

// kernelGo is the portable micro-kernel. It keeps two rows × eight columns of
// accumulators in locals (sixteen values, the register file of most targets) and
// sweeps that block over the tile, so each element is still Σ_p in order of p.
func kernelGo(kc int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if kc == 0 {
		storeTile(c, ldc, acc, &[mr * nr]float32{})
		return
	}
	a = a[:kc*mr]
	b = b[:(kc-1)*ldb+nr]
	var t [mr * nr]float32
	for i := 0; i < mr; i += 2 {
		for j := 0; j < nr; j += 8 {
			var s00, s01, s02, s03, s04, s05, s06, s07 float32
			var s10, s11, s12, s13, s14, s15, s16, s17 float32
			for p := range kc {
				a0, a1 := a[p*mr+i], a[p*mr+i+1]
				r := b[p*ldb+j : p*ldb+j+8 : p*ldb+j+8]
				b0, b1, b2, b3, b4, b5, b6, b7 := r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
				s00 += a0 * b0
				s01 += a0 * b1
				s02 += a0 * b2
				s03 += a0 * b3
				s04 += a0 * b4
				s05 += a0 * b5
				s06 += a0 * b6
				s07 += a0 * b7
				s10 += a1 * b0
				s11 += a1 * b1
				s12 += a1 * b2
				s13 += a1 * b3
				s14 += a1 * b4
				s15 += a1 * b5
				s16 += a1 * b6
				s17 += a1 * b7
			}
			copy(t[i*nr+j:], []float32{s00, s01, s02, s03, s04, s05, s06, s07})
			copy(t[(i+1)*nr+j:], []float32{s10, s11, s12, s13, s14, s15, s16, s17})
		}
	}
	storeTile(c, ldc, acc, &t)
}

// storeTile writes an mr×nr tile of sums into c: c = t, or c + t when acc.
func storeTile(c []float32, ldc int, acc bool, t *[mr * nr]float32) {
	for i := range mr {
		row, s := c[i*ldc:i*ldc+nr], t[i*nr:i*nr+nr]
		if !acc {
			copy(row, s)
			continue
		}
		for j := range row {
			row[j] += s[j]
		}
	}
}

// rowGo is the portable row kernel: sums[j] += Σ_p a[p·astride]·b[p·ldb + j], four rows of
// B per sweep over sums. Each sum still takes its terms one at a time in order of p, in the
// same expression form as kernelGo, so the two round alike.
func rowGo(kc int, a []float32, astride int, b []float32, ldb int, sums []float32) {
	n := len(sums)
	if kc == 0 || n == 0 {
		return
	}
	b = b[:(kc-1)*ldb+n]
	p := 0
	for ; p+4 <= kc; p += 4 {
		a0, a1, a2, a3 := a[p*astride], a[(p+1)*astride], a[(p+2)*astride], a[(p+3)*astride]
		r0 := b[p*ldb : p*ldb+n]
		r1 := b[(p+1)*ldb : (p+1)*ldb+n]
		r2 := b[(p+2)*ldb : (p+2)*ldb+n]
		r3 := b[(p+3)*ldb : (p+3)*ldb+n]
		for j := range sums {
			s := sums[j]
			s += a0 * r0[j]
			s += a1 * r1[j]
			s += a2 * r2[j]
			s += a3 * r3[j]
			sums[j] = s
		}
	}
	for ; p < kc; p++ {
		ap := a[p*astride]
		r := b[p*ldb : p*ldb+n]
		for j := range sums {
			sums[j] += ap * r[j]
		}
	}
}
