package goeng_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/goeng"
)

// TestOpProfileChargesOps runs a small traced computation under an OpProfile and wants
// its report to name the forward ops, their VJPs and the totals, and the profile to stop
// charging once stopped.
func TestOpProfileChargesOps(t *testing.T) {
	e := goeng.New()
	x := fa(e, iota32(64*64), 64, 64)
	f := func(a []*mx.Array) []*mx.Array {
		return []*mx.Array{mx.Sum(mx.Tanh(mx.Matmul(a[0], a[0])), false)}
	}
	p := goeng.StartOpProfile()
	mx.ValueAndGrad(f)([]*mx.Array{x})
	p.Stop()
	mx.Matmul(x, x) // after Stop: not charged
	var b strings.Builder
	p.WriteReport(&b, 1)
	r := b.String()
	for _, want := range []string{"per step (1 steps)", "predicted on", "matmul [64 64]", "vjp:matmul [64 64]", "tanh [64 64]", "vjp:tanh"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	// The forward's x·x and the VJP's g·xᵀ and xᵀ·g, not the product after Stop.
	if got, want := p.Flops(), int64(3*2*64*64*64); got != want {
		t.Errorf("Flops() = %d, want %d", got, want)
	}
	if !regexp.MustCompile(`(?m)^matmul +.* [0-9]+\.[0-9]$`).MatchString(r) {
		t.Errorf("report gives matmul no GFLOP/s:\n%s", r)
	}
	if !regexp.MustCompile(`(?m)^tanh +.* -$`).MatchString(r) {
		t.Errorf("report gives tanh a GFLOP/s:\n%s", r)
	}
	if !strings.Contains(r, "products (sgemm): 0.002 GFLOP per step") {
		t.Errorf("report lacks the step's products:\n%s", r)
	}
	if n := len(regexp.MustCompile(`(?m)^matmul +[0-9]`).FindAllString(r, -1)); n != 1 {
		t.Errorf("%d summary lines for matmul, want 1:\n%s", n, r)
	}
}
