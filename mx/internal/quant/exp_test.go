package quant

import (
	"math/rand/v2"
	"testing"
)

var lut4 = func() (t [256][2]float32) {
	for i := range 256 {
		t[i] = [2]float32{float32(i & 15), float32(i >> 4)}
	}
	return
}()

func dot4lut(words []uint32, x []float32) float32 {
	x = x[:len(words)*8]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := x[i*8 : i*8+8 : i*8+8]
		l0 := &lut4[w&255]
		l1 := &lut4[w>>8&255]
		l2 := &lut4[w>>16&255]
		l3 := &lut4[w>>24]
		a0 += xx[0]*l0[0] + xx[1]*l0[1]
		a1 += xx[2]*l1[0] + xx[3]*l1[1]
		a2 += xx[4]*l2[0] + xx[5]*l2[1]
		a3 += xx[6]*l3[0] + xx[7]*l3[1]
	}
	return (a0 + a1) + (a2 + a3)
}

// x pre-scaled by 16^-p
func dot4mask(words []uint32, x []float32) float32 {
	x = x[:len(words)*8]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := x[i*8 : i*8+8 : i*8+8]
		a0 += xx[0]*float32(w&0xF) + xx[4]*float32(w&0xF0000)
		a1 += xx[1]*float32(w&0xF0) + xx[5]*float32(w&0xF00000)
		a2 += xx[2]*float32(w&0xF00) + xx[6]*float32(w&0xF000000)
		a3 += xx[3]*float32(w&0xF000) + xx[7]*float32(w&0xF0000000)
	}
	return (a0 + a1) + (a2 + a3)
}
func dot4maskI(words []uint32, x []float32) float32 {
	x = x[:len(words)*8]
	var a0, a1, a2, a3 float32
	for i, w := range words {
		xx := x[i*8 : i*8+8 : i*8+8]
		v := int32(w)
		a0 += xx[0]*float32(v&0xF) + xx[4]*float32(v&0xF0000)
		a1 += xx[1]*float32(v&0xF0) + xx[5]*float32(v&0xF00000)
		a2 += xx[2]*float32(v&0xF00) + xx[6]*float32(v&0xF000000)
		a3 += xx[3]*float32(v&0xF000) + xx[7]*float32(int32(w>>28))
	}
	return (a0 + a1) + (a2 + a3)
}

func benchDot(b *testing.B, f func([]uint32, []float32) float32) {
	rng := rand.New(rand.NewPCG(1, 1))
	words := make([]uint32, 352*64)
	for i := range words {
		words[i] = rng.Uint32()
	}
	x := randX(rng, 2816)
	var s float32
	for b.Loop() {
		for r := range 64 {
			ws := words[r*352 : (r+1)*352]
			for g := range 44 {
				s += f(ws[g*8:(g+1)*8], x[g*64:(g+1)*64])
			}
		}
	}
	b.ReportMetric(2*2816*64*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	_ = s
}
func BenchmarkDot4(b *testing.B)      { benchDot(b, dot4) }
func BenchmarkDot4LUT(b *testing.B)   { benchDot(b, dot4lut) }
func BenchmarkDot4Mask(b *testing.B)  { benchDot(b, dot4mask) }
func BenchmarkDot4MaskI(b *testing.B) { benchDot(b, dot4maskI) }

func dot2x4b(x0, x1, w0, w1, w2, w3 []float32) [8]float32 {
	x1 = x1[:len(x0)]
	w0, w1, w2, w3 = w0[:len(x0)], w1[:len(x0)], w2[:len(x0)], w3[:len(x0)]
	var s00, s01, s02, s03, s10, s11, s12, s13 float32
	for i, a := range x0 {
		b := x1[i]
		c := w0[i]
		s00 += a * c
		s10 += b * c
		c = w1[i]
		s01 += a * c
		s11 += b * c
		c = w2[i]
		s02 += a * c
		s12 += b * c
		c = w3[i]
		s03 += a * c
		s13 += b * c
	}
	return [8]float32{s00, s01, s02, s03, s10, s11, s12, s13}
}

func dot3x4(x0, x1, x2, w0, w1, w2, w3 []float32) [12]float32 {
	x1, x2 = x1[:len(x0)], x2[:len(x0)]
	w0, w1, w2, w3 = w0[:len(x0)], w1[:len(x0)], w2[:len(x0)], w3[:len(x0)]
	var s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23 float32
	for i, a := range x0 {
		b := x1[i]
		d := x2[i]
		c := w0[i]
		s00 += a * c
		s10 += b * c
		s20 += d * c
		c = w1[i]
		s01 += a * c
		s11 += b * c
		s21 += d * c
		c = w2[i]
		s02 += a * c
		s12 += b * c
		s22 += d * c
		c = w3[i]
		s03 += a * c
		s13 += b * c
		s23 += d * c
	}
	return [12]float32{s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23}
}

func BenchmarkK2x4(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randX(rng, 6*512)
	w := randX(rng, 4*512)
	for b.Loop() {
		for m := 0; m < 6; m += 2 {
			dot2x4(x[m*512:(m+1)*512], x[(m+1)*512:(m+2)*512], w[:512], w[512:1024], w[1024:1536], w[1536:])
		}
	}
	b.ReportMetric(2*6*4*512*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
func BenchmarkK2x4b(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randX(rng, 6*512)
	w := randX(rng, 4*512)
	for b.Loop() {
		for m := 0; m < 6; m += 2 {
			dot2x4b(x[m*512:(m+1)*512], x[(m+1)*512:(m+2)*512], w[:512], w[512:1024], w[1024:1536], w[1536:])
		}
	}
	b.ReportMetric(2*6*4*512*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
func BenchmarkK3x4(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randX(rng, 6*512)
	w := randX(rng, 4*512)
	for b.Loop() {
		for m := 0; m < 6; m += 3 {
			dot3x4(x[m*512:(m+1)*512], x[(m+1)*512:(m+2)*512], x[(m+2)*512:(m+3)*512], w[:512], w[512:1024], w[1024:1536], w[1536:])
		}
	}
	b.ReportMetric(2*6*4*512*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
