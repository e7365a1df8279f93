package diffusiongemma

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// ShardStats describes a checkpoint written by WriteSyntheticShards.
type ShardStats struct {
	Shards  int
	Tensors int
	Bytes   int64 // tensor bytes on disk (headers not counted)
}

// WriteSyntheticShards writes a complete synthetic checkpoint of cfg to dir, quantized by
// policy ("4", "8" or "mixed"; see Synthesize), without ever holding more than one layer:
// the tensors are drawn straight in the stored form, one shard per decoder layer plus one
// for the embedding, self-conditioning and scalars (model-0000k-of-0000n.safetensors and
// model.safetensors.index.json), then config.json, generation_config.json and, when
// given, tokenizer.json. That is how a 26B-parameter checkpoint of the real geometry is
// made on a machine with memory to train it (about 14 GB at 4 bits) but not to hold it
// as float32.
//
// A quantized weight is drawn as what it stores: uniform codes, and per row a scale and
// bias that spread the codes evenly over ±a·u (u uniform in [0.9, 1.1], a = √(3/in) as
// Synthesize's variance-preserving linears, 1 for the embedding) — weights uniform on the
// code grid, of Synthesize's scale. Norms, scalars and router scales follow Synthesize's
// rules in bfloat16. Each tensor is drawn in row blocks of its own seeded streams, in
// parallel, so the bytes depend only on seed and cfg. The vision tower, if cfg has one,
// is not written (the checkpoint is text-only). cfg.Quantization is set as Synthesize
// sets it.
func WriteSyntheticShards(dir string, cfg *Config, seed uint64, policy string, tokenizerJSON []byte) (ShardStats, error) {
	bitsFor, group, err := quantPlan(cfg, policy)
	if err != nil {
		return ShardStats{}, err
	}
	if group == 0 {
		return ShardStats{}, fmt.Errorf("diffusiongemma: sharded synthetic checkpoints are quantized: --bits %q", policy)
	}
	def := 4
	if policy == Bits8 {
		def = 8
	}
	q := &Quantization{GroupSize: group, Bits: def, Mode: QuantModeAffine, Modules: map[string]ModuleQuantization{}}
	cfg.Quantization = q
	cfg.TextConfig.Dtype = "bfloat16"
	return writeShards(dir, cfg, seed, bitsFor, group, q, false, tokenizerJSON)
}

// WriteSyntheticBF16Shards writes an unquantized bfloat16 checkpoint of cfg the way
// WriteSyntheticShards writes a quantized one — one shard per decoder layer, drawn in
// parallel, never more than a layer in memory — with Synthesize's weights (linears
// uniform in ±√(3/in), the embedding in ±1) rounded to bfloat16: the dtype and, with
// hfLayout, the tensor names of the original release as transformers' save_pretrained
// writes it (experts.gate_up_proj / experts.down_proj without ".weight"). It is the input
// `convert` is measured on: 26B-A4B is about 50 GB this way.
func WriteSyntheticBF16Shards(dir string, cfg *Config, seed uint64, hfLayout bool, tokenizerJSON []byte) (ShardStats, error) {
	cfg.Quantization = nil
	cfg.TextConfig.Dtype = "bfloat16"
	return writeShards(dir, cfg, seed, func(string) int { return 0 }, 0, nil, hfLayout, tokenizerJSON)
}

func writeShards(dir string, cfg *Config, seed uint64, bitsFor func(string) int, group int, q *Quantization, hfLayout bool, tokenizerJSON []byte) (ShardStats, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ShardStats{}, fmt.Errorf("write checkpoint: %w", err)
	}
	// Shard 1: everything outside the decoder layers; shard i+2: layer i.
	t := &cfg.TextConfig
	layerOf := func(ts TensorSpec) int {
		for i := range t.NumHiddenLayers {
			if strings.HasPrefix(ts.Module, LayerPrefix(i)+".") {
				return i
			}
		}
		return -1
	}
	shards := make([][]TensorSpec, t.NumHiddenLayers+1)
	for _, ts := range ExpectedTensors(cfg) {
		shards[layerOf(ts)+1] = append(shards[layerOf(ts)+1], ts)
	}
	var stats ShardStats
	weightMap := map[string]string{}
	for k, specs := range shards {
		name := safetensors.ShardName(k+1, len(shards))
		var tensors []safetensors.Tensor
		for _, ts := range specs {
			idx := tensorSeed(ts.Name)
			bits := 0
			if ts.Quantizable {
				bits = bitsFor(ts.Module)
			}
			if bits == 0 {
				name := ts.Name
				if hfLayout && strings.Contains(name, ".experts.") {
					name = strings.TrimSuffix(name, ".weight")
				}
				draw := drawPlain
				if ts.Quantizable {
					draw = drawDense
				}
				tensors = append(tensors, safetensors.Tensor{Name: name, DType: safetensors.BF16, Shape: ts.Shape,
					Data: draw(ts, seed, idx)})
				continue
			}
			if bits != q.Bits {
				q.Modules[ts.Module] = ModuleQuantization{Quantized: true, Bits: bits, GroupSize: group}
			}
			w, s, b, err := drawQuantized(ts, bits, group, seed, idx)
			if err != nil {
				return stats, fmt.Errorf("write checkpoint: %s: %w", ts.Module, err)
			}
			tensors = append(tensors, w, s, b)
		}
		if err := safetensors.Write(filepath.Join(dir, name), tensors, map[string]string{"format": "mlx"}); err != nil {
			return stats, fmt.Errorf("write checkpoint: %w", err)
		}
		for _, tn := range tensors {
			weightMap[tn.Name] = name
			stats.Bytes += int64(len(tn.Data))
		}
		stats.Tensors += len(tensors)
		stats.Shards++
	}
	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": stats.Bytes}, weightMap}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(index); err != nil {
		return stats, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, safetensors.IndexFile), buf.Bytes()); err != nil {
		return stats, fmt.Errorf("write checkpoint: %w", err)
	}
	return stats, WriteCheckpoint(dir, cfg, nil, tokenizerJSON)
}

// tensorSeed is a stable per-tensor stream number (FNV-1a of the name).
func tensorSeed(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(name) {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return h
}

// rowBlocks runs fn over blocks of rows [lo, hi) of a tensor with rows rows, each block
// with its own random stream (seed, stream, block number), on every core.
func rowBlocks(rows int, seed, stream uint64, fn func(lo, hi int, rng *rand.Rand)) {
	const block = 256
	n := (rows + block - 1) / block
	var wg sync.WaitGroup
	next := make(chan int, n)
	for b := range n {
		next <- b
	}
	close(next)
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Go(func() {
			for b := range next {
				rng := rand.New(rand.NewPCG(seed^0x5eedf00d, stream+uint64(b)*0x9e3779b97f4a7c15))
				fn(b*block, min((b+1)*block, rows), rng)
			}
		})
	}
	wg.Wait()
}

// drawPlain draws an unquantized tensor (norms, scalars, router scales) as Synthesize's
// rules do, stored in bfloat16.
func drawPlain(ts TensorSpec, seed, stream uint64) []byte {
	n := prodInt(ts.Shape)
	lo, hi := 0.9, 1.1
	if strings.HasSuffix(ts.Name, "per_expert_scale") {
		lo, hi = 0.8, 1.2
	}
	vals := uniformFloats(rand.New(rand.NewPCG(seed^0x5eedf00d, stream)), n, lo, hi)
	out := make([]byte, 2*n)
	for i, v := range vals {
		binary.LittleEndian.PutUint16(out[2*i:], bf16(v))
	}
	return out
}

// drawDense draws an unquantized linear, embedding or expert weight as Synthesize does
// (uniform in ±√(3/in), ±1 for the embedding), stored in bfloat16.
func drawDense(ts TensorSpec, seed, stream uint64) []byte {
	in := ts.Shape[len(ts.Shape)-1]
	rows := prodInt(ts.Shape[:len(ts.Shape)-1])
	a := math.Sqrt(3 / float64(in))
	if strings.HasSuffix(ts.Module, "embed_tokens") {
		a = 1
	}
	out := make([]byte, 2*rows*in)
	rowBlocks(rows, seed, stream, func(lo, hi int, rng *rand.Rand) {
		for i := lo * in; i < hi*in; i++ {
			binary.LittleEndian.PutUint16(out[2*i:], bf16(float32(a*(2*rng.Float64()-1))))
		}
	})
	return out
}

// drawQuantized draws a quantized weight [.., out, in] as packed uint32 codes and
// bfloat16 scales and biases (see WriteSyntheticShards).
func drawQuantized(ts TensorSpec, bits, group int, seed, stream uint64) (w, s, b safetensors.Tensor, err error) {
	wShape, sShape, err := QuantizedShapes(ts.Shape, bits, group)
	if err != nil {
		return w, s, b, err
	}
	in := ts.Shape[len(ts.Shape)-1]
	rows := prodInt(ts.Shape[:len(ts.Shape)-1])
	wpr, gpr := wShape[len(wShape)-1], sShape[len(sShape)-1]
	a := math.Sqrt(3 / float64(in))
	if strings.HasSuffix(ts.Module, "embed_tokens") {
		a = 1
	}
	levels := float64(int(1)<<bits - 1)
	codes := make([]byte, 4*rows*wpr)
	scales := make([]byte, 2*rows*gpr)
	biases := make([]byte, 2*rows*gpr)
	rowBlocks(rows, seed, stream, func(lo, hi int, rng *rand.Rand) {
		cw := codes[4*lo*wpr : 4*hi*wpr]
		for i := 0; i+8 <= len(cw); i += 8 {
			binary.LittleEndian.PutUint64(cw[i:], rng.Uint64())
		}
		if len(cw)%8 != 0 {
			binary.LittleEndian.PutUint32(cw[len(cw)-4:], rng.Uint32())
		}
		for r := lo; r < hi; r++ {
			ar := a * (0.9 + 0.2*rng.Float64())
			sc := bf16(float32(2 * ar / levels))
			bi := bf16(float32(-ar))
			for g := range gpr {
				binary.LittleEndian.PutUint16(scales[2*(r*gpr+g):], sc)
				binary.LittleEndian.PutUint16(biases[2*(r*gpr+g):], bi)
			}
		}
	})
	m := ts.Module
	return safetensors.Tensor{Name: m + ".weight", DType: safetensors.U32, Shape: wShape, Data: codes},
		safetensors.Tensor{Name: m + ".scales", DType: safetensors.BF16, Shape: sShape, Data: scales},
		safetensors.Tensor{Name: m + ".biases", DType: safetensors.BF16, Shape: sShape, Data: biases}, nil
}

// bf16 rounds a finite float32 to bfloat16 bits, to nearest even.
func bf16(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
