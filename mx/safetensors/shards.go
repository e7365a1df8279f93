package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dgtune/dgtune/internal/atomicfile"
	"io"
	"os"
	"path/filepath"
)

// ShardName returns the file name of shard k (1-based) of n, in the Hugging
// Face spelling: model-00001-of-00003.safetensors.
func ShardName(k, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", k, n)
}

// WriteShards writes tensors into dir (created if needed) as shards named by
// ShardName plus a model.safetensors.index.json mapping every tensor to its
// shard, always in this sharded layout even when one shard suffices.
//
// Tensors are taken in sorted-name order and packed greedily: a shard is
// closed when the next tensor's data would push it past maxShardBytes
// (tensor bytes only, headers not counted). A single tensor larger than the
// limit gets a shard of its own. Every shard carries metadata as its
// __metadata__; the index's "metadata" holds total_size, the sum of all
// tensor bytes, as Hugging Face writes it.
//
// Every tensor is validated before anything is written. An existing index is
// removed first, then each shard and finally the new index are written
// atomically (see Write), so an index on disk only ever names shards of its
// own save, completely written. Shard files of an earlier save that the new
// one does not overwrite are left in place.
func WriteShards(dir string, tensors []Tensor, maxShardBytes int64, metadata map[string]string) error {
	indexPath := filepath.Join(dir, IndexFile)
	if maxShardBytes <= 0 {
		return fmt.Errorf("safetensors: write %s: maxShardBytes must be positive, got %d", dir, maxShardBytes)
	}
	if err := checkMetadata(indexPath, metadata); err != nil {
		return err
	}
	sorted, err := checkTensors(indexPath, tensors)
	if err != nil {
		return err
	}
	if len(sorted) == 0 {
		return fmt.Errorf("safetensors: write %s: no tensors to write", dir)
	}

	var groups [][]Tensor
	var cur []Tensor
	var curBytes, total int64
	for _, t := range sorted {
		n := int64(len(t.Data))
		if len(cur) > 0 && curBytes+n > maxShardBytes {
			groups = append(groups, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, t)
		curBytes += n
		total += n
	}
	groups = append(groups, cur)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", dir, err)
	}
	// An index left from an earlier save would vouch for a mix of old and
	// new shards if we crashed part-way; without one, OpenCheckpoint's
	// fallback sees every shard and rejects the duplicated names instead.
	if err := os.Remove(indexPath); err == nil {
		if err := atomicfile.SyncDir(dir); err != nil {
			return fmt.Errorf("safetensors: write %s: %w", dir, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("safetensors: write %s: %w", dir, err)
	}
	weightMap := map[string]string{}
	for i, g := range groups {
		name := ShardName(i+1, len(groups))
		if err := Write(filepath.Join(dir, name), g, metadata); err != nil {
			return err
		}
		for _, t := range g {
			weightMap[t.Name] = name
		}
	}

	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(index); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", indexPath, err)
	}
	return writeAtomic(indexPath, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	})
}
