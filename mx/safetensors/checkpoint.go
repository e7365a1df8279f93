package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The file names of a Hugging Face / MLX model directory.
const (
	IndexFile  = "model.safetensors.index.json"
	SingleFile = "model.safetensors"
)

// maxIndexSize bounds the index JSON we are willing to read; real indexes
// are a few megabytes.
const maxIndexSize = 256 << 20

// Checkpoint is a model directory's weights, possibly spread over several
// files, seen as one set of uniquely named tensors.
type Checkpoint struct {
	dir      string
	files    []*File
	owner    map[string]*File
	names    []string
	metadata map[string]string
	closed   bool
}

// OpenCheckpoint opens the weights of the model directory dir, looking for,
// in order:
//
//  1. model.safetensors.index.json: every shard it names is opened once, and
//     every tensor it lists must be in the shard it names. Tensors a shard
//     holds beyond those listed are served too.
//  2. model.safetensors alone.
//  3. every *.safetensors file in dir, in sorted order.
//
// In every case a tensor name found in two files is an error (ErrDuplicate).
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: open checkpoint: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("safetensors: open checkpoint %s: not a directory", dir)
	}
	indexPath := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(indexPath); err == nil {
		return openIndexed(dir, indexPath)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: open checkpoint: %w", err)
	}
	single := filepath.Join(dir, SingleFile)
	if _, err := os.Stat(single); err == nil {
		return openFiles(dir, []string{single}, nil)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: open checkpoint: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".safetensors") {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	if len(paths) == 0 {
		return nil, formatErr(dir, "", ErrNoWeights, "no %s, %s or *.safetensors file", IndexFile, SingleFile)
	}
	slices.Sort(paths)
	return openFiles(dir, paths, nil)
}

type indexJSON struct {
	Metadata  map[string]json.RawMessage `json:"metadata"`
	WeightMap map[string]string          `json:"weight_map"`
}

func openIndexed(dir, indexPath string) (*Checkpoint, error) {
	raw, err := readBounded(indexPath, maxIndexSize)
	if err != nil {
		return nil, fmt.Errorf("safetensors: open checkpoint: %w", err)
	}
	var idx indexJSON
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, formatErr(indexPath, "", ErrIndex, "%v", err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, formatErr(indexPath, "", ErrIndex, "weight_map is missing or empty")
	}
	shardSet := map[string]bool{}
	for name, shard := range idx.WeightMap {
		// Shards must stay inside the model directory.
		if shard == "" || !filepath.IsLocal(filepath.FromSlash(shard)) {
			return nil, formatErr(indexPath, name, ErrIndex, "shard %q is not a file inside %s", shard, dir)
		}
		shardSet[shard] = true
	}
	var paths []string
	for _, shard := range slices.Sorted(maps.Keys(shardSet)) {
		paths = append(paths, filepath.Join(dir, filepath.FromSlash(shard)))
	}

	// Index metadata overrides the shards' (it describes the whole set).
	// Non-string values such as total_size keep their JSON spelling.
	meta := map[string]string{}
	for k, v := range idx.Metadata {
		var s string
		if json.Unmarshal(v, &s) == nil {
			meta[k] = s
		} else {
			meta[k] = string(v)
		}
	}
	c, err := openFiles(dir, paths, meta)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		shard := idx.WeightMap[name]
		f, ok := c.owner[name]
		if !ok || f.path != filepath.Join(dir, filepath.FromSlash(shard)) {
			_ = c.Close()
			where := "no shard holds it"
			if ok {
				where = "it is in " + filepath.Base(f.path)
			}
			return nil, formatErr(indexPath, name, ErrIndex, "indexed in shard %q, but %s", shard, where)
		}
	}
	return c, nil
}

// openFiles opens paths and builds the name → file map. overrides, if any,
// is laid over the merged metadata of the files.
func openFiles(dir string, paths []string, overrides map[string]string) (_ *Checkpoint, err error) {
	c := &Checkpoint{dir: dir, owner: map[string]*File{}, metadata: map[string]string{}}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, f)
		for _, name := range f.hdr.names {
			if prev, dup := c.owner[name]; dup {
				return nil, formatErr(p, name, ErrDuplicate, "also in %s", prev.path)
			}
			c.owner[name] = f
			c.names = append(c.names, name)
		}
		// Shards usually repeat the same metadata (e.g. format: mlx); on a
		// conflict the first file in sorted order wins.
		for k, v := range f.hdr.metadata {
			if _, ok := c.metadata[k]; !ok {
				c.metadata[k] = v
			}
		}
	}
	maps.Copy(c.metadata, overrides)
	slices.Sort(c.names)
	return c, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit", path, st.Size(), limit)
	}
	return os.ReadFile(path)
}

// Dir returns the directory the checkpoint was opened from.
func (c *Checkpoint) Dir() string { return c.dir }

// Files returns the paths of the files backing the checkpoint, sorted.
func (c *Checkpoint) Files() []string {
	out := make([]string, len(c.files))
	for i, f := range c.files {
		out[i] = f.path
	}
	return out
}

// FileOf returns the path of the file (shard) holding the named tensor, and false when
// no file holds it.
func (c *Checkpoint) FileOf(name string) (string, bool) {
	f, ok := c.owner[name]
	if !ok {
		return "", false
	}
	return f.path, true
}

// Names returns every tensor name, sorted.
func (c *Checkpoint) Names() []string { return slices.Clone(c.names) }

// Info describes the named tensor, as File.Info.
func (c *Checkpoint) Info(name string) (TensorInfo, bool) {
	f, ok := c.owner[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Data returns the named tensor's bytes, as File.Data.
func (c *Checkpoint) Data(name string) ([]byte, error) {
	f, ok := c.owner[name]
	if !ok {
		return nil, formatErr(c.dir, name, ErrNotFound, "no such tensor")
	}
	return f.Data(name)
}

// Metadata returns the merged metadata: each file's __metadata__ (the first
// file in sorted order winning on conflicts), overridden by the index's
// "metadata" object, whose non-string values appear as their JSON text
// (total_size as "12345").
func (c *Checkpoint) Metadata() map[string]string { return maps.Clone(c.metadata) }

// Keep calls File.Keep on every file: slices returned by Data outlive Close.
func (c *Checkpoint) Keep() {
	for _, f := range c.files {
		f.Keep()
	}
}

// Close closes every file. Slices returned by Data must not be used after it, unless
// Keep was called.
func (c *Checkpoint) Close() error {
	if c.closed {
		return formatErr(c.dir, "", ErrClosed, "checkpoint already closed")
	}
	c.closed = true
	var errs []error
	for _, f := range c.files {
		if !f.closed {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// ReadAt copies part of the named tensor's bytes into dst, as File.ReadAt.
func (c *Checkpoint) ReadAt(name string, dst []byte, off int64) error {
	f, ok := c.owner[name]
	if !ok {
		return formatErr(c.dir, name, ErrNotFound, "no such tensor")
	}
	return f.ReadAt(name, dst, off)
}
