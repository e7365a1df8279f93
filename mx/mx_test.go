package mx_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/mx/shapeeng"
)

func TestBroadcastShapes(t *testing.T) {
	cases := []struct {
		in   [][]int
		want []int // nil: error
	}{
		{[][]int{{2, 3}, {3}}, []int{2, 3}},
		{[][]int{{2, 1}, {1, 3}}, []int{2, 3}},
		{[][]int{{2, 1, 4}, {3, 1}}, []int{2, 3, 4}},
		{[][]int{{}, {5}}, []int{5}},
		{[][]int{{1}, {0}}, []int{0}},
		{[][]int{{2, 1}, {1, 3}, {4, 1, 1}}, []int{4, 2, 3}},
		{[][]int{{2, 3}, {4}}, nil},
		{[][]int{{2}, {3}}, nil},
	}
	for _, c := range cases {
		got, err := mx.BroadcastShapes(c.in...)
		switch {
		case c.want == nil && err == nil:
			t.Errorf("BroadcastShapes(%v) = %v, want an error", c.in, got)
		case c.want != nil && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("BroadcastShapes(%v) = %v, %v, want %v", c.in, got, err, c.want)
		}
	}
}

func TestPromoteTypes(t *testing.T) {
	cases := []struct{ a, b, want mx.DType }{
		{mx.Float32, mx.Float32, mx.Float32},
		{mx.Bool, mx.Uint8, mx.Uint8},
		{mx.Int32, mx.Float16, mx.Float16},
		{mx.BFloat16, mx.Float16, mx.Float32},
		{mx.BFloat16, mx.Float32, mx.Float32},
		{mx.Int32, mx.Uint32, mx.Int64},
		{mx.Int64, mx.Int32, mx.Int64},
		{mx.Float64, mx.Float32, mx.Float64},
		{mx.Bool, mx.Int32, mx.Int32},
	}
	for _, c := range cases {
		if got := mx.PromoteTypes(c.a, c.b); got != c.want {
			t.Errorf("PromoteTypes(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
		if got := mx.PromoteTypes(c.b, c.a); got != c.want {
			t.Errorf("PromoteTypes(%s, %s) = %s, want %s", c.b, c.a, got, c.want)
		}
	}
}

func TestDType(t *testing.T) {
	sizes := map[mx.DType]int{mx.Float32: 4, mx.Float16: 2, mx.BFloat16: 2, mx.Float64: 8, mx.Int32: 4, mx.Int64: 8, mx.Uint32: 4, mx.Uint8: 1, mx.Bool: 1}
	for dt, n := range sizes {
		if dt.Size() != n {
			t.Errorf("%s.Size() = %d, want %d", dt, dt.Size(), n)
		}
	}
	if s := mx.DType(42).String(); s != "DType(42)" {
		t.Errorf("unknown dtype prints %q", s)
	}
	if !mx.BFloat16.IsFloat() || mx.Bool.IsInteger() || !mx.Uint8.IsInteger() || mx.Int32.IsFloat() {
		t.Errorf("IsFloat/IsInteger disagree with the dtype table")
	}
	if !mx.OpLogicalOr.IsComparison() || mx.OpRemainder.IsComparison() || mx.OpAdd.IsComparison() {
		t.Errorf("IsComparison disagrees with the op table")
	}
	if mx.OpRsqrt.String() != "rsqrt" || mx.OpFloorDivide.String() != "floor_divide" || mx.ReduceLogSumExp.String() != "logsumexp" {
		t.Errorf("op names do not match MLX")
	}
}

func TestOpen(t *testing.T) {
	if !slices.Contains(mx.Engines(), "go") {
		t.Fatalf("engines %v lack go", mx.Engines())
	}
	for _, name := range []string{"", "auto", "go"} {
		e, err := mx.Open(name)
		if err != nil {
			t.Fatalf("Open(%q): %v", name, err)
		}
		if name == "go" && e.Name() != "go" {
			t.Errorf("Open(go) gave %s", e.Name())
		}
	}
	_, err := mx.Open("tpu")
	if err == nil || !strings.Contains(err.Error(), `"tpu"`) || !strings.Contains(err.Error(), "go") {
		t.Errorf("Open(tpu) error %v, want one naming the engine and listing those compiled in", err)
	}
	if !slices.Contains(mx.Engines(), "mlx") {
		if _, err := mx.Open("mlx"); err == nil || !strings.Contains(err.Error(), "-tags mlx") {
			t.Errorf("Open(mlx) without the mlx build error %v, want a hint about -tags mlx", err)
		}
	}
}

// TestTidyKeepsReturned runs on every engine: arrays returned from Tidy stay usable.
func TestTidyKeepsReturned(t *testing.T) {
	mxtest.Engines(t, func(t *testing.T, e mx.Engine) {
		a := mx.FromFloat32(e, []float32{1, 2}, 2)
		out := mx.Tidy(e, func() []*mx.Array {
			tmp := mx.MulScalar(a, 3)
			return []*mx.Array{mx.AddScalar(tmp, 1)}
		})
		// 3·[1 2] + 1 = [4 7]; a itself existed before Tidy and must survive too.
		if got := out[0].Float32s(); !slices.Equal(got, []float32{4, 7}) {
			t.Errorf("Tidy result %v, want [4 7]", got)
		}
		if got := a.Float32s(); !slices.Equal(got, []float32{1, 2}) {
			t.Errorf("input after Tidy %v", got)
		}
		b := mx.AddScalar(a, 1)
		b.Free()
		b.Free() // freeing twice is harmless
	})
}

func TestMemoryLimitWithoutAllocator(t *testing.T) {
	e, err := mx.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := mx.SetMemoryLimit(e, 1<<30); ok || err != nil {
		t.Fatalf("SetMemoryLimit on the go engine = %v, %v; want false, nil", ok, err)
	}
	if d, ok := mx.Device(e); ok || d.Kind != "cpu" {
		t.Fatalf("Device(go) = %+v, %v; want cpu, false", d, ok)
	}
}

// TestFromBoolFunc: fill writes the elements row-major on an engine that reads values; a
// ValueFree engine (the shape-only one) gets a bool array of the shape without fill
// running.
func TestFromBoolFunc(t *testing.T) {
	fill := func(v []bool) {
		for i := range v {
			v[i] = i%3 == 0
		}
	}
	a := mx.FromBoolFunc(mxtest.Go(t), fill, 2, 3)
	if got := a.Bools(); !slices.Equal(got, []bool{true, false, false, true, false, false}) || !slices.Equal(a.Shape(), []int{2, 3}) {
		t.Errorf("go engine: %v %v, want [true false false true false false] of [2 3]", got, a.Shape())
	}
	called := false
	b := mx.FromBoolFunc(shapeeng.New(shapeeng.Options{}), func([]bool) { called = true }, 4, 5)
	if called || !slices.Equal(b.Shape(), []int{4, 5}) || b.DType() != mx.Bool {
		t.Errorf("shape engine: fill called %v, array %v %s; want not called, [4 5] bool", called, b.Shape(), b.DType())
	}
}

// TestAsyncEvalFallback: on an engine without async evaluation (the go engine) AsyncEval
// is Eval; nil entries are skipped, and nothing at all is a no-op.
func TestAsyncEvalFallback(t *testing.T) {
	e := mxtest.Go(t)
	if _, ok := e.(mx.AsyncEvaluator); ok {
		t.Fatal("the go engine claims async evaluation")
	}
	a := mx.Add(mx.FromFloat32(e, []float32{1, 2}, 2), mx.FromFloat32(e, []float32{3, 4}, 2))
	mx.AsyncEval(nil, a)
	mx.AsyncEval()
	mx.AsyncEval(nil)
	if got := a.Float32s(); !slices.Equal(got, []float32{4, 6}) {
		t.Errorf("AsyncEval then read: %v, want [4 6]", got)
	}
}
