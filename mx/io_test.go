package mx_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// fileLoader is the go engine posing as an engine that reads files itself: read says
// what LoadSafetensorsFile returns for each file, and files records the calls.
type fileLoader struct {
	mx.Engine
	read  func(path string, names []string) (map[string]mx.Handle, error)
	files [][]string
}

func (f *fileLoader) LoadSafetensorsFile(path string, names []string) (map[string]mx.Handle, error) {
	f.files = append(f.files, append([]string{filepath.Base(path)}, names...))
	return f.read(path, names)
}

// TestLoadAll: LoadAll asks a FileLoader once per shard for the tensors of that shard,
// takes what it returns, reads a declined shard through Go instead, and refuses arrays
// whose dtype or shape differ from the header's.
func TestLoadAll(t *testing.T) {
	g := mxtest.Go(t)
	f32 := func(v ...float32) []byte { return mx.Bytes(mx.FromFloat32(g, v, len(v))) }
	ts := []safetensors.Tensor{
		{Name: "a", DType: safetensors.F32, Shape: []int{2}, Data: f32(1, 2)},
		{Name: "b", DType: safetensors.F32, Shape: []int{2}, Data: f32(3, 4)},
		{Name: "c", DType: safetensors.F32, Shape: []int{2}, Data: f32(5, 6)},
	}
	dir := filepath.Join(t.TempDir(), "m")
	// 8-byte shards: a, b and c in three files.
	if err := safetensors.WriteShards(dir, ts, 8, nil); err != nil {
		t.Fatal(err)
	}
	// The engine's reader: every tensor as [7, 7], so the test can tell who read what.
	sevens := func(_ string, names []string) (map[string]mx.Handle, error) {
		out := map[string]mx.Handle{}
		for _, n := range names {
			out[n] = mx.FromFloat32(g, []float32{7, 7}, 2).Handle()
		}
		return out, nil
	}
	for _, tc := range []struct {
		name  string
		read  func(string, []string) (map[string]mx.Handle, error)
		want  map[string][]float32
		fails string
	}{
		{"engine reads", sevens, map[string][]float32{"a": {7, 7}, "c": {7, 7}}, ""},
		{"engine declines c's shard", func(p string, names []string) (map[string]mx.Handle, error) {
			if strings.Contains(p, "model-00003") {
				return nil, errors.ErrUnsupported
			}
			return sevens(p, names)
		}, map[string][]float32{"a": {7, 7}, "c": {5, 6}}, ""},
		{"engine fails", func(string, []string) (map[string]mx.Handle, error) {
			return nil, errors.New("disk on fire")
		}, nil, "disk on fire"},
		{"wrong shape", func(_ string, names []string) (map[string]mx.Handle, error) {
			return map[string]mx.Handle{names[0]: mx.FromFloat32(g, []float32{7}, 1).Handle()}, nil
		}, nil, `read tensor "c" as float32 [1], the header says float32 [2]`},
		{"missing tensor", func(string, []string) (map[string]mx.Handle, error) {
			return map[string]mx.Handle{}, nil
		}, nil, `did not return tensor "c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &fileLoader{Engine: g, read: tc.read}
			ck, err := mx.OpenCheckpoint(e, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			got, err := ck.LoadAll([]string{"c", "a"})
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("LoadAll = %v, %v; want an error containing %q", got, err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for n, want := range tc.want {
				if v := got[n].Float32s(); !slices.Equal(v, want) {
					t.Errorf("%s = %v, want %v", n, v, want)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("LoadAll returned %d tensors, want %d", len(got), len(tc.want))
			}
			// One call per shard, in the order the names were asked for, b's never.
			want := [][]string{{"model-00003-of-00003.safetensors", "c"}, {"model-00001-of-00003.safetensors", "a"}}
			if !slices.EqualFunc(e.files, want, slices.Equal) {
				t.Errorf("engine asked for %q, want %q", e.files, want)
			}
		})
	}
}
