package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dgtune/dgtune/internal/atomicfile"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/safetensors"
)

// DefaultMaxShardBytes is mlx-lm's shard limit (MAX_FILE_SIZE_GB = 5, in GiB).
const DefaultMaxShardBytes = 5 << 30

// Options is one conversion.
type Options struct {
	Model  string         // input checkpoint directory
	Out    string         // output directory (must not exist unless Overwrite)
	Recipe dg.QuantRecipe // bits, group size, keep patterns
	// DType stores unquantized tensors and scales in this dtype; nil takes the config's
	// (torch_dtype, dtype, text_config.dtype), else each tensor keeps its own.
	DType         *mx.DType
	Overwrite     bool
	MaxShardBytes int64     // zero means DefaultMaxShardBytes
	Engine        mx.Engine // runs the casts and the quantization
	Progress      io.Writer // progress lines; nil for none
	Terminal      bool      // Progress is a terminal: draw a bar
}

// Result describes a finished conversion.
type Result struct {
	Out           string
	Tensors       int    // tensors written
	Quantized     int    // modules quantized
	Kept          []Kept // quantizable modules left unquantized
	Shards        int
	InputBytes    int64 // tensor bytes read
	OutputBytes   int64 // tensor bytes written
	Parameters    int64 // logical parameters (quantized ones counted unpacked, as mlx-lm)
	BitsPerWeight float64
	DType         string // storage dtype of unquantized tensors ("" = as stored)
	Elapsed       time.Duration
}

// Kept is a quantizable module the recipe leaves unquantized, and why.
type Kept struct{ Module, Why string }

// Errors of the output check.
var (
	ErrOutExists = errors.New("already exists")
	ErrQuantized = errors.New("is already quantized")
)

// outTensor is one tensor of the output: its spec, the input tensor it comes from, the
// piece of ConvertTensor's output it is and its shard.
type outTensor struct {
	spec  safetensors.Tensor
	piece int
	shard int
}

// job converts one input tensor into its one or three output tensors.
type job struct {
	name, stored string // MLX name, name in the input
	src          dg.TensorSource
	plan         dg.ModuleQuant
	outs         [3]string // output tensor per piece ("" when the piece does not exist)
}

// Run converts o.Model into o.Out.
func Run(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	if err := checkOut(o); err != nil {
		return Result{}, err
	}
	cfg, err := dg.LoadConfig(o.Model)
	if err != nil {
		return Result{}, err
	}
	if cfg.Quantization != nil {
		return Result{}, fmt.Errorf("--model %s %w (its config.json has a quantization map, bits %d); convert reads bf16, f16 or f32 checkpoints",
			o.Model, ErrQuantized, cfg.Quantization.Bits)
	}
	dt := o.DType
	if dt == nil {
		if dt, err = cfg.StorageDType(); err != nil {
			return Result{}, fmt.Errorf("%s: %w", o.Model, err)
		}
	}
	ck, err := mx.OpenCheckpoint(o.Engine, o.Model)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", o.Model, err)
	}
	defer ck.Close()
	names, err := dg.SanitizeNames(cfg, preadCheckpoint{ck}, false)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", o.Model, err)
	}
	jobs, outs, q, res, err := plan(cfg, ck, names, o.Recipe, dt)
	if err != nil {
		return Result{}, fmt.Errorf("convert %s: %w", o.Model, err)
	}
	res.Out = o.Out
	shards := packShards(outs, o.MaxShardBytes)
	res.Shards = len(shards)

	st, err := atomicfile.StageDir(o.Out)
	if err != nil {
		return Result{}, fmt.Errorf("--out %s: %w", o.Out, err)
	}
	defer st.Remove()
	if err := writeWeights(ctx, o, dt, st.Path, jobs, outs, shards, &res); err != nil {
		return Result{}, err
	}
	if err := writeConfig(o, st.Path, q, o.DType); err != nil {
		return Result{}, err
	}
	if err := copySideFiles(o.Model, st.Path); err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	// An existing out (Overwrite) is replaced only once the new checkpoint is complete.
	if err := st.Replace(); err != nil {
		return Result{}, fmt.Errorf("--out %s: %w", filepath.Clean(o.Out), err)
	}
	if dt != nil {
		res.DType = dt.String()
	}
	res.BitsPerWeight = float64(res.OutputBytes) * 8 / float64(max(res.Parameters, 1))
	res.Elapsed = time.Since(start)
	return res, nil
}

// checkOut refuses an output that exists (without Overwrite), that is not a directory,
// or that is the input or inside it, before any work.
func checkOut(o Options) error {
	if o.Out == "" {
		return errors.New("--out is required")
	}
	in, err := filepath.Abs(o.Model)
	if err != nil {
		return err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return err
	}
	if out == in || strings.HasPrefix(out, in+string(filepath.Separator)) {
		return fmt.Errorf("--out %s is the input checkpoint or inside it; write the conversion elsewhere", o.Out)
	}
	if st, err := os.Stat(o.Out); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("--out %s exists and is not a directory", o.Out)
		}
		if !o.Overwrite {
			return fmt.Errorf("--out %s %w; pass --overwrite to replace it", o.Out, ErrOutExists)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--out %s: %w", o.Out, err)
	}
	return atomicfile.CheckDirCreatable(filepath.Dir(filepath.Clean(o.Out)))
}

// preadCheckpoint serves sanitize's copy checks (lm_head, encoder copies) with pread
// into fresh buffers, so that comparing a 1.5 GB tied head leaves nothing resident.
type preadCheckpoint struct{ ck *mx.Checkpoint }

func (p preadCheckpoint) Names() []string { return p.ck.Names() }
func (p preadCheckpoint) Info(name string) (mx.DType, []int, error) {
	return p.ck.Info(name)
}
func (p preadCheckpoint) Data(name string) ([]byte, error) {
	dt, shape, err := p.ck.Info(name)
	if err != nil {
		return nil, err
	}
	n := dt.Size()
	for _, d := range shape {
		n *= d
	}
	b := make([]byte, n)
	return b, p.ck.ReadAt(name, b, 0)
}

// plan checks the input against the config, plans every module and lists the jobs and
// the output tensors (sorted by name).
func plan(cfg *dg.Config, ck *mx.Checkpoint, names map[string]string, r dg.QuantRecipe, dt *mx.DType) ([]job, []outTensor, *dg.Quantization, Result, error) {
	var res Result
	shapes := map[string][]int{}
	dtypes := map[string]mx.DType{}
	for name, stored := range names {
		d, shape, err := ck.Info(stored)
		if err != nil {
			return nil, nil, nil, res, err
		}
		shapes[name], dtypes[name] = shape, d
	}
	if err := checkGeometry(cfg, shapes, dtypes); err != nil {
		return nil, nil, nil, res, err
	}
	plans, q, err := dg.PlanQuantization(cfg, r, shapes)
	if err != nil {
		return nil, nil, nil, res, err
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var jobs []job
	var outs []outTensor
	for _, name := range sorted {
		stored, shape, sdt := names[name], shapes[name], dtypes[name]
		odt := sdt
		if dt != nil && sdt.IsFloat() {
			odt = *dt
		}
		n := int64(sdt.Size())
		for _, d := range shape {
			n *= int64(d)
		}
		res.InputBytes += n
		res.Parameters += n / int64(sdt.Size())
		j := job{name: name, stored: stored, src: dg.TensorSource{DType: sdt, Shape: shape, Read: readerOf(ck, stored)}}
		module := strings.TrimSuffix(name, ".weight")
		p, planned := plans[module]
		if planned && strings.HasSuffix(name, ".weight") {
			j.plan = p
			if p.Bits == 0 {
				res.Kept = append(res.Kept, Kept{Module: module, Why: p.Why})
			}
		}
		if j.plan.Bits == 0 {
			j.outs[dg.PieceWeight] = name
			outs = append(outs, outTensor{spec: tensorSpec(name, odt, shape), piece: dg.PieceWeight})
			jobs = append(jobs, j)
			continue
		}
		wShape, sShape, err := dg.QuantizedTensorShapes(shape, j.plan)
		if err != nil {
			return nil, nil, nil, res, fmt.Errorf("%s: %w", module, err)
		}
		res.Quantized++
		j.outs = [3]string{module + ".weight", module + ".scales", module + ".biases"}
		outs = append(outs,
			outTensor{spec: tensorSpec(j.outs[0], mx.Uint32, wShape), piece: dg.PieceWeight},
			outTensor{spec: tensorSpec(j.outs[1], odt, sShape), piece: dg.PieceScales},
			outTensor{spec: tensorSpec(j.outs[2], odt, sShape), piece: dg.PieceBiases})
		jobs = append(jobs, j)
	}
	slices.SortFunc(outs, func(a, b outTensor) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	res.Tensors = len(outs)
	return jobs, outs, q, res, nil
}

func readerOf(ck *mx.Checkpoint, stored string) func([]byte, int64) error {
	return func(dst []byte, off int64) error { return ck.ReadAt(stored, dst, off) }
}

func tensorSpec(name string, dt mx.DType, shape []int) safetensors.Tensor {
	st, _ := mx.SafetensorsDType(dt)
	return safetensors.Tensor{Name: name, DType: st, Shape: shape}
}

// checkGeometry lists every text tensor that is missing, misshapen or not a float, and
// every tensor the model has no place for, before anything is written (the loader would
// refuse the output for the same reasons, but only after the whole conversion).
func checkGeometry(cfg *dg.Config, shapes map[string][]int, dtypes map[string]mx.DType) error {
	var problems []string
	expected := map[string]bool{}
	for _, ts := range dg.ExpectedTensors(cfg) {
		expected[ts.Name] = true
		shape, ok := shapes[ts.Name]
		switch {
		case !ok:
			problems = append(problems, "missing tensor "+ts.Name)
		case !slices.Equal(shape, ts.Shape):
			problems = append(problems, fmt.Sprintf("tensor %s has shape %v, want %v", ts.Name, shape, ts.Shape))
		case !dtypes[ts.Name].IsFloat():
			problems = append(problems, fmt.Sprintf("tensor %s has dtype %s, want a float type", ts.Name, dtypes[ts.Name]))
		}
	}
	var unexpected []string
	for n := range shapes {
		if !expected[n] && !dg.IsVisionTensor(n) {
			unexpected = append(unexpected, n)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		problems = append(problems, "unexpected tensor "+n)
	}
	if len(problems) == 0 {
		return nil
	}
	const show = 10
	extra := ""
	if len(problems) > show {
		extra = fmt.Sprintf("; ... and %d more", len(problems)-show)
		problems = problems[:show]
	}
	return fmt.Errorf("checkpoint does not match its config: %s%s", strings.Join(problems, "; "), extra)
}

// packShards assigns the sorted outputs to shards greedily, as mlx-lm's make_shards:
// a shard is closed when the next tensor would take it past limit.
func packShards(outs []outTensor, limit int64) [][]int {
	if limit <= 0 {
		limit = DefaultMaxShardBytes
	}
	var shards [][]int
	var cur []int
	var size int64
	for i := range outs {
		n := specBytes(outs[i].spec)
		if len(cur) > 0 && size+n > limit {
			shards = append(shards, cur)
			cur, size = nil, 0
		}
		cur = append(cur, i)
		size += n
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}
	for k, idx := range shards {
		for _, i := range idx {
			outs[i].shard = k
		}
	}
	return shards
}

func specBytes(t safetensors.Tensor) int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// shardFile names shard k of n as mlx-lm does: model.safetensors alone, else
// model-0000k-of-0000n.safetensors.
func shardFile(k, n int) string {
	if n == 1 {
		return safetensors.SingleFile
	}
	return safetensors.ShardName(k+1, n)
}

// writeWeights creates the shards, runs every job into them and writes the index.
func writeWeights(ctx context.Context, o Options, dt *mx.DType, stage string, jobs []job, outs []outTensor, shards [][]int, res *Result) error {
	files := make([]*safetensors.Planned, len(shards))
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Abort()
			}
		}
	}()
	byName := map[string]int{}
	meta := map[string]string{"format": "mlx"}
	for k, idx := range shards {
		specs := make([]safetensors.Tensor, len(idx))
		for j, i := range idx {
			specs[j] = outs[i].spec
			byName[outs[i].spec.Name] = i
		}
		f, err := safetensors.CreatePlanned(filepath.Join(stage, shardFile(k, len(shards))), specs, meta)
		if err != nil {
			return err
		}
		files[k] = f
	}
	bar := newProgress(o.Progress, o.Terminal, res.InputBytes)
	for _, j := range jobs {
		src := j.src
		read := src.Read
		src.Read = func(dst []byte, off int64) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := read(dst, off); err != nil {
				return err
			}
			bar.add(int64(len(dst)))
			return nil
		}
		err := dg.ConvertTensor(o.Engine, src, dt, j.plan, func(piece int, off int64, b []byte) error {
			name := j.outs[piece]
			return files[outs[byName[name]].shard].WriteAt(name, b, off)
		})
		if err != nil {
			return fmt.Errorf("convert %s: %w", j.stored, err)
		}
	}
	bar.finish()
	weightMap := map[string]string{}
	for k, f := range files {
		if err := f.Close(); err != nil {
			return err
		}
		for _, i := range shards[k] {
			weightMap[outs[i].spec.Name] = shardFile(k, len(shards))
			res.OutputBytes += specBytes(outs[i].spec)
		}
		files[k] = nil
	}
	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": res.OutputBytes, "total_parameters": res.Parameters}, weightMap}
	b, err := json.MarshalIndent(index, "", "    ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(stage, safetensors.IndexFile), append(b, '\n'))
}
