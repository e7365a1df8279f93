package threefry

import "math"

// fma32 is C's fmaf: a*b+c rounded once to float32. Rounding the float64 sum
// and then to float32 can round twice the wrong way when the float64 result
// sits on a float32 midpoint, so the float64 sum is first rounded to odd,
// which makes the second rounding correct (Boldo & Melquiond: 53 >= 24+2
// bits). The explicit float64 conversions stop the compiler from fusing.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b)) // exact: 24+24 bits fit in 53
	cc := float64(c)
	s := p + cc
	if math.IsInf(s, 0) || math.IsNaN(s) || s == 0 {
		return float32(s)
	}
	// TwoSum: err is exactly (p + cc) - s.
	bv := s - p
	err := (p - (s - bv)) + (cc - bv)
	if err != 0 {
		u := math.Float64bits(s)
		if u&1 == 0 {
			// The exact sum lies strictly between s and its neighbour on
			// err's side; round-to-odd picks whichever of the two is odd.
			if (err > 0) == (s > 0) {
				u++
			} else {
				u--
			}
			s = math.Float64frombits(u)
		}
	}
	return float32(s)
}

// log32 is a correctly rounded float32 logarithm (barring the rare input
// whose log lies within a float64 ulp of a float32 midpoint), standing in for
// logf.
func log32(x float32) float32 { return float32(math.Log(float64(x))) }

// exp32 stands in for float32 exp the same way.
func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// Erfinv is MLX's float32 inverse error function: with t = log(1 - x²) it
// evaluates one of two minimax polynomials in t (|t| > 6.125 picks the tail
// one) by fma steps and multiplies by x. The coefficients are MLX's (from
// N. Juffa's erfinvf); maximum error about 2.36 ulp.
func Erfinv(x float32) float32 {
	t := log32(fma32(x, -x, 1))
	var p float32
	if abs32(t) > 6.125 {
		p = 3.03697567e-10
		p = fma32(p, t, 2.93243101e-8)
		p = fma32(p, t, 1.22150334e-6)
		p = fma32(p, t, 2.84108955e-5)
		p = fma32(p, t, 3.93552968e-4)
		p = fma32(p, t, 3.02698812e-3)
		p = fma32(p, t, 4.83185798e-3)
		p = fma32(p, t, -2.64646143e-1)
		p = fma32(p, t, 8.40016484e-1)
	} else {
		p = 5.43877832e-9
		p = fma32(p, t, 1.43285448e-7)
		p = fma32(p, t, 1.22774793e-6)
		p = fma32(p, t, 1.12963626e-7)
		p = fma32(p, t, -5.61530760e-5)
		p = fma32(p, t, -1.47697632e-4)
		p = fma32(p, t, 2.31468678e-3)
		p = fma32(p, t, 1.15392581e-2)
		p = fma32(p, t, -2.32015476e-1)
		p = fma32(p, t, 8.86226892e-1)
	}
	return x * p
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
