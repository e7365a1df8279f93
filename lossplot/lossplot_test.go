package lossplot

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// metrics writes the lines train writes: a val event at step 0, then per step a train event
// with loss[i] and lr[i], and val events at the steps of val.
func metrics(loss, lr []float64, val map[int]float64) string {
	var b strings.Builder
	if v, ok := val[0]; ok {
		fmt.Fprintf(&b, `{"event":"val","iteration":0,"val_loss":%v,"examples":3,"seconds":0.01}`+"\n", v)
	}
	for i := range loss {
		step := i + 1
		fmt.Fprintf(&b, `{"event":"train","iteration":%d,"train_loss":%v,"learning_rate":%v,"iterations_per_second":9.5,"tokens_per_second":300,"trained_tokens":%d,"peak_memory_bytes":1000,"eta_seconds":1}`+"\n",
			step, loss[i], lr[i], 30*step)
		if v, ok := val[step]; ok {
			fmt.Fprintf(&b, `{"event":"val","iteration":%d,"val_loss":%v,"examples":3,"seconds":0.01}`+"\n", step, v)
		}
	}
	return b.String()
}

func TestParse(t *testing.T) {
	text := metrics([]float64{4, 3.5, 2.25}, []float64{1e-4, 2e-4, 3e-4}, map[int]float64{0: 4.5, 2: 3, 3: 3.25}) +
		`{"event":"val","iteration":4,"val_loss":null,"examples":3,"seconds":0.01}` + "\n" + // non-finite: left out
		`{"event":"train","error":"json: unsupported value: NaN"}` + "\n" + // what train writes for an event it cannot encode
		`{"event":"test","iteration":4,"test_loss":1}` + "\n" + // another kind: skipped
		"\n"
	s, err := Parse(strings.NewReader(text), "metrics.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := Series{
		Train:        []Point{{1, 4}, {2, 3.5}, {3, 2.25}},
		Val:          []Point{{0, 4.5}, {2, 3}, {3, 3.25}},
		LearningRate: []Point{{1, 1e-4}, {2, 2e-4}, {3, 3e-4}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Parse = %+v, want %+v", s, want)
	}
	if best, ok := s.Best(); !ok || best != (Point{2, 3}) {
		t.Errorf("Best() = %v, %v; want {2 3}, true", best, ok)
	}
	tie := Series{Val: []Point{{0, 2}, {5, 1}, {9, 1}}}
	if best, _ := tie.Best(); best.Step != 5 {
		t.Errorf("Best() of a tie = step %d, want the first, 5", best.Step)
	}
	if _, ok := (Series{Train: want.Train}).Best(); ok {
		t.Error("Best() without val losses reports one")
	}
}

// TestParseErrors: a malformed line is one error naming the file and the line.
func TestParseErrors(t *testing.T) {
	good := `{"event":"train","iteration":1,"train_loss":2,"learning_rate":0.1}` + "\n"
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not JSON", `{"event":"train","iteration":`, "metrics: m.jsonl:2: invalid JSON: unexpected end of JSON input"},
		{"garbage", `hello`, "metrics: m.jsonl:2: invalid JSON: invalid character 'h' looking for beginning of value"},
		{"not an object", `[1, 2]`, `metrics: m.jsonl:2: not a metrics event (no "event" field)`},
		{"no event", `{"iteration":3,"train_loss":1}`, `metrics: m.jsonl:2: not a metrics event (no "event" field)`},
		{"no loss", `{"event":"train","iteration":3,"learning_rate":0.1}`, `metrics: m.jsonl:2: train event without "train_loss"`},
		{"no iteration", `{"event":"val","val_loss":1}`, `metrics: m.jsonl:2: val event without "iteration"`},
		{"no val loss", `{"event":"val","iteration":3}`, `metrics: m.jsonl:2: val event without "val_loss"`},
		{"no rate", `{"event":"train","iteration":3,"train_loss":1}`, `metrics: m.jsonl:2: train event without "learning_rate"`},
		{"wrong type", `{"event":"train","iteration":"3","train_loss":1,"learning_rate":0.1}`, `metrics: m.jsonl:2: "iteration" is a JSON string, want a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(good+tc.line+"\n"+good), "m.jsonl")
			if err == nil || err.Error() != tc.want {
				t.Errorf("Parse: %v\nwant %s", err, tc.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := Read(filepath.Join(t.TempDir(), "metrics.jsonl"))
		if err == nil || !strings.HasPrefix(err.Error(), "metrics: open ") || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("Read of a missing file: %v", err)
		}
	})
}

func decode(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("png.Decode: %v", err)
	}
	return img
}

// diffBox is the bounding box of the pixels where a and b differ (empty when none do).
func diffBox(a, b image.Image) image.Rectangle {
	var box image.Rectangle
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return box
}

// TestWriteFile: the PNG decodes, has the plot's size, and its curves are the metrics':
// the same metrics draw the same pixels; metrics that differ only in the train loss of
// late steps (neither its smallest nor its largest value, so the axes stay put) differ
// only in the loss panel (the top half) and only right of the earlier steps, where the
// curve changed.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	n := 40
	loss, lr := make([]float64, n), make([]float64, n)
	for i := range loss {
		loss[i] = 4 / float64(i+1) // 4 → 0.1
		lr[i] = 1e-3 * float64(min(i+1, 10)) / 10
	}
	val := map[int]float64{0: 4.2, 10: 0.8, 20: 0.3, 30: 0.2, 40: 0.15}
	changed := append([]float64(nil), loss...)
	for i := 30; i < 36; i++ {
		changed[i] = 2 // inside [0.1, 4]
	}
	draw := func(name string, loss []float64) image.Image {
		path := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(path, []byte(metrics(loss, lr, val)), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".png")
		if err := WriteFile(out, s, "run"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		img := decode(t, b)
		if got := img.Bounds(); got != image.Rect(0, 0, Width, Height) {
			t.Fatalf("%s: image bounds %v, want %d×%d", name, got, Width, Height)
		}
		return img
	}
	a, again, b := draw("a", loss), draw("a-again", loss), draw("b", changed)
	if box := diffBox(a, again); !box.Empty() {
		t.Errorf("the same metrics drew different pixels in %v", box)
	}
	box := diffBox(a, b)
	t.Logf("diff box %v", box)
	if box.Empty() {
		t.Fatal("different train losses drew the same image")
	}
	// Steps 1..40 span the plot's width; the curves first differ after step 30.
	if box.Max.Y > Height/2 || box.Min.X < Width/2 {
		t.Errorf("the images differ in %v; want only the top half's right part (%d×%d image)", box, Width, Height)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestRenderShapes: a run with one report, one without validation and one without any
// positive loss all draw; nothing to draw is an error.
func TestRenderShapes(t *testing.T) {
	for name, s := range map[string]Series{
		"one report":  {Train: []Point{{1, 2}}, LearningRate: []Point{{1, 1e-4}}},
		"only val":    {Val: []Point{{0, 3}}},
		"no val":      {Train: []Point{{1, 2}, {2, 1}}, LearningRate: []Point{{1, 0}, {2, 0}}},
		"zero losses": {Train: []Point{{1, 0}, {2, 0}}, LearningRate: []Point{{1, 1}, {2, 1}}, Val: []Point{{2, 0}}},
	} {
		img, err := Render(s, name, 320, 240)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if img.Bounds() != image.Rect(0, 0, 320, 240) {
			t.Errorf("%s: bounds %v", name, img.Bounds())
		}
	}
	if _, err := Render(Series{}, "empty", Width, Height); err != ErrEmpty {
		t.Errorf("Render(empty) = %v, want ErrEmpty", err)
	}
	if _, err := Render(Series{Val: []Point{{0, 1}}}, "tiny", 10, 10); err == nil {
		t.Error("Render at 10×10 pixels: no error")
	}
}

func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (logTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0.1, 4, []string{"0.1", "0.2", "0.5", "1", "2"}},
		{0.6, 0.9, []string{"0.6", "0.75", "0.9"}}, // between 1-2-5 marks: gonum's evenly spaced ticks
		{0.45, 1.1, []string{"0.5", "1"}},
		{0.001, 10, []string{"0.001", "0.01", "0.1", "1", "10"}},
	} {
		if got := labels(tc.lo, tc.hi); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("logTicks.Ticks(%g, %g) labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}
