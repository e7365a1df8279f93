package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func u8(name string, data ...byte) Tensor {
	return Tensor{Name: name, DType: U8, Shape: []int{len(data)}, Data: data}
}

func mustWrite(t *testing.T, path string, meta map[string]string, tensors ...Tensor) {
	t.Helper()
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
}

func mustWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkServes asserts that c holds exactly tensors, with their bytes.
func checkServes(t *testing.T, c *Checkpoint, tensors ...Tensor) {
	t.Helper()
	var want []string
	for _, tt := range tensors {
		want = append(want, tt.Name)
		d, err := c.Data(tt.Name)
		if err != nil || !bytes.Equal(d, tt.Data) {
			t.Errorf("Data(%q) = %v, %v; want %v", tt.Name, d, err, tt.Data)
		}
		if info, ok := c.Info(tt.Name); !ok || info.DType != tt.DType || !slices.Equal(info.Shape, tt.Shape) {
			t.Errorf("Info(%q) = %+v, %v", tt.Name, info, ok)
		}
	}
	slices.Sort(want)
	if got := c.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

// TestWriteShardsRoundTrip packs five tensors under a 16-byte limit. In
// name order: a (8) + b (8) = 16 fills shard 1; c (20) exceeds the limit on
// its own and gets shard 2; d (4) + e (4) make shard 3. total_size is
// 8+8+20+4+4 = 44.
func TestWriteShardsRoundTrip(t *testing.T) {
	tensors := []Tensor{
		u8("e", pattern(4, 50)...),
		u8("c", pattern(20, 30)...),
		{Name: "a", DType: F32, Shape: []int{2}, Data: pattern(8, 10)},
		u8("d", pattern(4, 40)...),
		{Name: "b", DType: BF16, Shape: []int{2, 2}, Data: pattern(8, 20)},
	}
	dir := filepath.Join(t.TempDir(), "model")
	meta := map[string]string{"format": "mlx"}
	if err := WriteShards(dir, tensors, 16, meta); err != nil {
		t.Fatal(err)
	}
	s1, s2, s3 := "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"
	if got := dirNames(t, dir); !slices.Equal(got, []string{s1, s2, s3, IndexFile}) {
		t.Fatalf("directory holds %q", got)
	}
	raw, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	wantMap := map[string]string{"a": s1, "b": s1, "c": s2, "d": s3, "e": s3}
	if !maps.Equal(idx.WeightMap, wantMap) || idx.Metadata["total_size"] != 44 {
		t.Errorf("index = %s", raw)
	}

	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkServes(t, c, tensors...)
	if got, want := c.Metadata(), map[string]string{"format": "mlx", "total_size": "44"}; !maps.Equal(got, want) {
		t.Errorf("Metadata() = %q, want %q", got, want)
	}
	if got := c.Files(); len(got) != 3 || filepath.Base(got[2]) != s3 {
		t.Errorf("Files() = %q", got)
	}
	for name, shard := range wantMap {
		if got, ok := c.FileOf(name); !ok || got != filepath.Join(dir, shard) {
			t.Errorf("FileOf(%q) = %q, %v; want %q", name, got, ok, filepath.Join(dir, shard))
		}
	}
	if got, ok := c.FileOf("z"); ok {
		t.Errorf("FileOf(%q) = %q, true; want false", "z", got)
	}
}

func TestWriteShardsSingle(t *testing.T) {
	dir := t.TempDir()
	if err := WriteShards(dir, []Tensor{u8("x", 1, 2)}, 1<<30, nil); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"model-00001-of-00001.safetensors", IndexFile}) {
		t.Errorf("directory holds %q", got)
	}
}

func TestWriteShardsBad(t *testing.T) {
	dir := t.TempDir()
	if err := WriteShards(dir, []Tensor{u8("x", 1)}, 0, nil); err == nil || !strings.Contains(err.Error(), "maxShardBytes") {
		t.Errorf("maxShardBytes 0: error = %v", err)
	}
	if err := WriteShards(dir, nil, 10, nil); err == nil || !strings.Contains(err.Error(), "no tensors") {
		t.Errorf("no tensors: error = %v", err)
	}
	// A bad tensor anywhere stops the whole save before any file is written.
	err := WriteShards(dir, []Tensor{u8("a", 1), {Name: "b", DType: F32, Shape: []int{1}, Data: []byte{1}}}, 1, nil)
	if !errors.Is(err, ErrSize) {
		t.Errorf("bad tensor: error = %v, want ErrSize", err)
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Errorf("directory holds %q after failed saves", got)
	}
}

// TestWriteShardsOverwrite re-saves a directory with fewer shards: the new
// index must describe the new save, and the stale shard is not read.
func TestWriteShardsOverwrite(t *testing.T) {
	dir := t.TempDir()
	if err := WriteShards(dir, []Tensor{u8("a", 1), u8("b", 2)}, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteShards(dir, []Tensor{u8("a", 3), u8("b", 4)}, 10, nil); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkServes(t, c, u8("a", 3), u8("b", 4))
}

func TestOpenCheckpointSingleFile(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, SingleFile), map[string]string{"format": "pt"}, u8("w", 1, 2, 3))
	// With model.safetensors present, other files are not weights.
	mustWrite(t, filepath.Join(dir, "adapters.safetensors"), nil, u8("w", 9))
	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkServes(t, c, u8("w", 1, 2, 3))
	if got := c.Metadata(); !maps.Equal(got, map[string]string{"format": "pt"}) {
		t.Errorf("Metadata() = %q", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Data("w"); !errors.Is(err, ErrClosed) {
		t.Errorf("Data after Close error = %v, want ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close error = %v, want ErrClosed", err)
	}
}

// TestOpenCheckpointGlob: without index or model.safetensors every
// *.safetensors file counts; metadata conflicts go to the first file in
// sorted order ("a.safetensors").
func TestOpenCheckpointGlob(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "b.safetensors"), map[string]string{"k": "from b", "only": "b"}, u8("y", 2))
	mustWrite(t, filepath.Join(dir, "a.safetensors"), map[string]string{"k": "from a"}, u8("x", 1))
	mustWriteFile(t, filepath.Join(dir, "notes.txt"), "not weights")
	if err := os.Mkdir(filepath.Join(dir, "dir.safetensors"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkServes(t, c, u8("x", 1), u8("y", 2))
	if got := c.Metadata(); !maps.Equal(got, map[string]string{"k": "from a", "only": "b"}) {
		t.Errorf("Metadata() = %q", got)
	}
	if _, err := c.Data("z"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Data(z) error = %v, want ErrNotFound", err)
	}
	if _, ok := c.Info("z"); ok {
		t.Error("Info(z) found a missing tensor")
	}
}

func TestOpenCheckpointBad(t *testing.T) {
	shard1, shard2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	index := func(weightMap string) string { return `{"metadata":{"total_size":2},"weight_map":` + weightMap + `}` }
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  error
		msg   string
	}{
		{"empty dir", func(t *testing.T, dir string) {}, ErrNoWeights, "no model.safetensors.index.json"},
		{"glob duplicate", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, "a.safetensors"), nil, u8("x", 1))
			mustWrite(t, filepath.Join(dir, "b.safetensors"), nil, u8("x", 2))
		}, ErrDuplicate, `tensor "x": also in`},
		{"bad single file", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, SingleFile), "\xff\xff\xff\xff\xff\xff\xff\x00{}")
		}, ErrHeaderLength, SingleFile},
		{"index not JSON", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, IndexFile), "{")
		}, ErrIndex, IndexFile},
		{"index without weight_map", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, IndexFile), `{"metadata":{}}`)
		}, ErrIndex, "weight_map is missing or empty"},
		{"shard outside dir", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"../model.safetensors"}`))
		}, ErrIndex, `shard "../model.safetensors" is not a file inside`},
		{"absolute shard", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"/etc/passwd"}`))
		}, ErrIndex, "not a file inside"},
		{"shard missing", func(t *testing.T, dir string) {
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"`+shard1+`"}`))
		}, fs.ErrNotExist, shard1},
		{"indexed tensor absent", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, shard1), nil, u8("x", 1))
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"`+shard1+`","y":"`+shard1+`"}`))
		}, ErrIndex, `tensor "y": indexed in shard "` + shard1 + `", but no shard holds it`},
		{"indexed tensor in other shard", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, shard1), nil, u8("x", 1))
			mustWrite(t, filepath.Join(dir, shard2), nil, u8("y", 1))
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"`+shard2+`","y":"`+shard1+`"}`))
		}, ErrIndex, "but it is in " + shard1},
		{"tensor in two shards", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, shard1), nil, u8("x", 1))
			mustWrite(t, filepath.Join(dir, shard2), nil, u8("x", 2), u8("y", 1))
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"`+shard1+`","y":"`+shard2+`"}`))
		}, ErrDuplicate, `tensor "x": also in`},
		{"corrupt shard", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, shard1), nil, u8("x", 1))
			mustWriteFile(t, filepath.Join(dir, shard2), "short")
			mustWriteFile(t, filepath.Join(dir, IndexFile), index(`{"x":"`+shard1+`","y":"`+shard2+`"}`))
		}, ErrShortFile, shard2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			c, err := OpenCheckpoint(dir)
			if err == nil {
				c.Close()
				t.Fatalf("OpenCheckpoint succeeded, want %v", tt.want)
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("OpenCheckpoint error = %v, want %v containing %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestOpenCheckpointNotADir(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenCheckpoint(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: error = %v, want fs.ErrNotExist", err)
	}
	file := filepath.Join(dir, "f")
	mustWriteFile(t, file, "x")
	if _, err := OpenCheckpoint(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file: error = %v, want not a directory", err)
	}
}
