package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/internal/peers"
	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/optim"
	"github.com/dgtune/dgtune/train/launch"
)

// cluster is this process's place in a data-parallel run: its rank, the MLX group that
// reduces across the ranks, and the side channel that watches them. A process that
// runs alone has a cluster of size 1 with neither, and every collective is the
// identity, so a run of one computes exactly what it did before distribution existed.
//
// Every rank runs the same steps and draws the same noise; the global batch is split
// across ranks (example b of a micro-batch belongs to rank b mod size, as in mlx-lm),
// and the gradients, losses and token counts are summed. Only rank 0 writes files.
type cluster struct {
	rank, size int
	backend    string
	source     string   // what described the group, for messages
	addrs      []string // ring: each rank's address
	coord      string   // nccl: rank 0's NCCL_HOST_IP:NCCL_PORT
	group      *mx.Group
	watch      *peers.Watch
	timeout    time.Duration
	log        io.Writer
	exit       func(error)
	dir        string // adapter_path, for the resume hint

	saveMu    sync.Mutex   // held while rank 0 writes a checkpoint
	exiting   atomic.Bool  // a goroutine has taken it upon itself to end the run
	lastSaved atomic.Int64 // step of the last complete checkpoint, -1 for none
	done      chan struct{}

	// Time spent in collectives (waiting for the slowest rank included), and the steps'
	// times, for DistributedStats.
	reduce time.Duration
	timing stepTiming
	// stopBy are the ranks that asked to stop (a signal), agreed in the last step's all_sum.
	stopBy []int
}

// alone is the cluster of a process that runs by itself.
func alone(cfg config.Config, opt Options) *cluster {
	c := &cluster{size: 1, log: opt.Log, dir: cfg.AdapterPath, done: make(chan struct{})}
	if c.log == nil {
		c.log = io.Discard
	}
	c.exit = opt.Exit
	if c.exit == nil {
		c.exit = func(err error) {
			fmt.Fprintf(os.Stderr, "train: %v\n", err)
			os.Exit(1)
		}
	}
	c.lastSaved.Store(-1)
	return c
}

// joinCluster joins the group the environment and cfg.Distributed describe, or returns
// a cluster of one. Forming the group is bounded by twice distributed_timeout: MLX's
// ring waits for its neighbours without a limit (and NCCL's rank 0 for the others), so
// past that the process ends with an error that says which ranks it was waiting for.
func joinCluster(cfg config.Config, opt Options) (*cluster, error) {
	c := alone(cfg, opt)
	w, err := launch.Detect(cfg.Distributed, os.Getenv, func() bool {
		e, err := mx.Open(cfg.Backend)
		return err == nil && mx.HasBackend(e, "nccl")
	})
	if err != nil {
		return nil, err
	}
	if w.Backend == "" {
		return c, nil
	}
	e, err := mx.Open(cfg.Backend)
	if err != nil {
		return nil, err
	}
	if !mx.HasDistributed(e) {
		if w.Size == 0 {
			return c, nil // distributed: any, and nothing describes a group
		}
		return nil, fmt.Errorf("distributed training (%d ranks, from %s) needs the mlx engine, and this run's engine is %s: build with -tags mlx (see README) and use backend mlx or auto", w.Size, w.Source, e.Name())
	}
	c.backend, c.source, c.addrs, c.coord, c.rank, c.size = w.Backend, w.Source, w.Addrs, w.Coordinator, w.Rank, w.Size
	c.timeout = time.Duration(cfg.DistributedTimeout) * time.Second
	formed := make(chan struct{})
	go func() {
		select {
		case <-formed:
		case <-time.After(2 * c.timeout):
			c.fatal(c.formationError())
		}
	}()
	g, err := mx.JoinGroup(e, w.Backend, w.Backend != "any")
	close(formed)
	if err != nil {
		if errors.Is(err, mx.ErrNoBackend) && w.Backend == "nccl" {
			return nil, fmt.Errorf("distributed: nccl (%d ranks, from %s): this MLX build has no NCCL backend, which MLX has only when built with CUDA and NCCL (see README, Distributed training); without GPUs use distributed: ring", w.Size, w.Source)
		}
		hint := ""
		if w.Backend == "mpi" {
			hint = " (MLX loads Open MPI's libmpi.so, libmpi.dylib on macOS; set MLX_MPI_LIBNAME to its file name if it has another, e.g. libmpi.so.40)"
		}
		return nil, fmt.Errorf("distributed: %s: %w%s", w.Source, err, hint)
	}
	switch {
	case w.Size > 0 && g.Size() != w.Size:
		return nil, fmt.Errorf("distributed: %s describes %d ranks, but MLX's %s backend formed a group of %d (for MPI: is libmpi where MLX looks for it, or MLX_MPI_LIBNAME set?)", w.Source, w.Size, w.Backend, g.Size())
	case w.Size > 0 && g.Rank() != w.Rank:
		return nil, fmt.Errorf("distributed: %s says rank %d, MLX says %d", w.Source, w.Rank, g.Rank())
	case g.Size() == 1:
		return c, nil // distributed: any (or mpi) and a group of one
	}
	c.group, c.rank, c.size = g, g.Rank(), g.Size()
	if len(c.addrs) == c.size || c.coord != "" {
		if err := c.startWatch(); err != nil {
			return nil, err
		}
	}
	gpu := ""
	if v, set := os.LookupEnv("CUDA_VISIBLE_DEVICES"); set && c.backend == "nccl" {
		gpu = ", CUDA_VISIBLE_DEVICES=" + v
	}
	if c.rank == 0 {
		fmt.Fprintf(c.log, "distributed: %d ranks over MLX's %s backend (%s%s); rank 0 writes %s\n", c.size, c.backend, c.source, gpu, cfg.AdapterPath)
	} else {
		fmt.Fprintf(c.log, "distributed: rank %d of %d joined (%s backend%s); rank 0 reports progress and writes the files\n", c.rank, c.size, c.backend, gpu)
	}
	return c, nil
}

func (c *cluster) formationError() error {
	if c.size < 2 { // MLX chose the group (distributed: any, or mpi outside mpirun)
		return fmt.Errorf("distributed: the %s group did not form within %s (%s)", c.backend, 2*c.timeout, c.source)
	}
	right, left := (c.rank+1)%c.size, (c.rank+c.size-1)%c.size
	where := ""
	switch {
	case len(c.addrs) == c.size:
		where = fmt.Sprintf(" check that this machine reaches rank %d at %s and that rank %d reaches it at %s;", right, c.addrs[right], left, c.addrs[c.rank])
	case c.coord != "":
		where = fmt.Sprintf(" check that every rank reaches rank 0 at %s (NCCL_HOST_IP:NCCL_PORT);", c.coord)
	}
	return fmt.Errorf("distributed: rank %d of %d: the group did not form within %s:%s every rank must be started (the same %s, each its own rank)", c.rank, c.size, 2*c.timeout, where, c.source)
}

// startWatch opens the side channel to the ring neighbours (rank−1 and rank+1, on
// NCCL too), on the hosts of the ring's own addresses, and starts the goroutine that
// ends the run when it reports a loss. NCCL's variables name rank 0's host alone, so
// there each rank listens on the address it reaches rank 0 from and tells the others.
func (c *cluster) startWatch() error {
	ring := len(c.addrs) == c.size
	var own netip.Addr // nccl: the address this rank tells the others
	var listenOn string
	if ring {
		listenOn = launch.HostOf(c.addrs[c.rank])
	} else {
		a, err := launch.LocalIPv4(c.coord)
		if err != nil {
			return fmt.Errorf("distributed: the address this rank reaches rank 0 (%s) from: %w", c.coord, err)
		}
		own, listenOn = a, a.String()
	}
	ln, err := peers.Listen(listenOn)
	if err != nil {
		return fmt.Errorf("distributed: %w", err)
	}
	row := []int32{int32(peers.Port(ln))}
	if !ring {
		for _, b := range own.As4() {
			row = append(row, int32(b))
		}
	}
	rows, err := c.gather(row)
	if err != nil {
		ln.Close()
		return err
	}
	hosts, ports := make([]string, c.size), make([]int, c.size)
	for i, r := range rows {
		ports[i] = int(r[0])
		if ring {
			hosts[i] = launch.HostOf(c.addrs[i])
		} else {
			hosts[i] = netip.AddrFrom4([4]byte{byte(r[1]), byte(r[2]), byte(r[3]), byte(r[4])}).String()
		}
	}
	w, err := peers.Connect(peers.Options{Rank: c.rank, Size: c.size, Hosts: hosts, Timeout: c.timeout}, ln, ports)
	if err != nil {
		return fmt.Errorf("distributed: %w", err)
	}
	c.watch = w
	go c.watchLoop()
	return nil
}

// watchLoop ends the process when the watch reports a lost rank: the run's own
// goroutine may be blocked inside MLX (a collective with a peer that will never
// answer), so it cannot be asked to return. A checkpoint being written is finished
// first.
func (c *cluster) watchLoop() {
	select {
	case <-c.watch.Lost():
	case <-c.done:
		return
	}
	locked := make(chan struct{})
	go func() {
		c.saveMu.Lock()
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(time.Minute):
	}
	c.fatal(c.stopError(c.watch.Err()))
}

// fatal ends the process with err, unless the run's goroutine is already ending it.
func (c *cluster) fatal(err error) {
	if c.exiting.CompareAndSwap(false, true) {
		c.exit(err)
	}
}

// stopError is the error of a rank that stops because the group broke.
func (c *cluster) stopError(cause error) error {
	hint := "rank 0 keeps the checkpoints"
	if c.rank == 0 {
		if k := c.lastSaved.Load(); k >= 0 {
			hint = fmt.Sprintf("the last checkpoint (step %d) in %s is intact: start every rank again with --resume", k, c.dir)
		} else {
			hint = "no checkpoint was written yet"
		}
	}
	return fmt.Errorf("distributed: rank %d of %d stops: %w; %s", c.rank, c.size, cause, hint)
}

// broken turns a failed collective into the error to stop with: the watch usually
// knows which rank was lost a moment after MLX notices its socket closed.
func (c *cluster) broken(err error) error {
	if c.watch != nil {
		select {
		case <-c.watch.Lost():
			return c.stopError(c.watch.Err())
		case <-time.After(3 * time.Second):
		}
	}
	return c.stopError(err)
}

// close ends this rank's part in the group after the run returned err: a goodbye when
// the run ended as agreed (finished, or stopped by a signal at the same step
// everywhere), a failure report otherwise, so that the other ranks stop and say why.
func (c *cluster) close(err error) {
	if c.group == nil {
		return
	}
	close(c.done)
	if c.watch != nil {
		if err == nil || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrNonFinite) {
			c.watch.Close()
		} else {
			c.watch.Fail(err)
		}
	}
	if !c.exiting.CompareAndSwap(false, true) {
		// The watch goroutine is ending the process with the lost rank's name.
		time.Sleep(10 * time.Second)
		return
	}
	if err == nil || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrNonFinite) {
		// After the last collective of a run that ended as agreed; a failed rank skips
		// it, so that mpirun sees the failure and ends the job.
		if cerr := c.group.Close(); cerr != nil {
			fmt.Fprintf(c.log, "distributed: %v\n", cerr)
		}
	}
}

// saving runs a write of checkpoint files; a lost rank does not end the process in the
// middle of it.
func (c *cluster) saving(step int, write func() error) error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	if err := write(); err != nil {
		return err
	}
	if step >= 0 {
		c.lastSaved.Store(int64(step))
	}
	return nil
}

// mine reports whether example b of a micro-batch is this rank's.
func (c *cluster) mine(b int) bool { return b%c.size == c.rank }

// allSum is Group.AllSum, timed, with a broken group turned into the stop error.
func (c *cluster) allSum(xs ...*mx.Array) ([]*mx.Array, error) {
	start := time.Now()
	out, err := c.group.AllSum(xs...)
	c.reduce += time.Since(start)
	if err != nil {
		return nil, c.broken(err)
	}
	return out, nil
}

// sumHost sums host values over the ranks (float32 on the wire: exact for counts
// below 2²⁴, rounded like any float32 sum otherwise).
func (c *cluster) sumHost(e mx.Engine, vals []float64) ([]float64, error) {
	if c.size == 1 || len(vals) == 0 {
		return vals, nil
	}
	f := make([]float32, len(vals))
	for i, v := range vals {
		f[i] = float32(v)
	}
	out, err := c.allSum(mx.FromFloat32(e, f, len(f)))
	if err != nil {
		return nil, err
	}
	sum := out[0].Float32s()
	res := make([]float64, len(sum))
	for i, v := range sum {
		res[i] = float64(v)
	}
	return res, nil
}

// gather returns every rank's row, in rank order; rows must have the same length on
// every rank. (An all_sum of a [size, k] array in which each rank fills its own row.)
func (c *cluster) gather(row []int32) ([][]int32, error) {
	if c.size == 1 {
		return [][]int32{row}, nil
	}
	k := len(row)
	all := make([]int32, c.size*k)
	copy(all[c.rank*k:], row)
	out, err := c.allSum(mx.FromInt32(c.group.Engine(), all, c.size, k))
	if err != nil {
		return nil, err
	}
	v := out[0].Int32s()
	rows := make([][]int32, c.size)
	for r := range rows {
		rows[r] = v[r*k : (r+1)*k]
	}
	return rows, nil
}

// broadcastChunk bounds the bytes of one all_sum of broadcast.
const broadcastChunk = 64 << 20

// broadcast returns rank 0's b on every rank, bit for bit (a uint8 all_sum in which
// the other ranks add zeros).
func (c *cluster) broadcast(b []byte) ([]byte, error) {
	if c.size == 1 {
		return b, nil
	}
	var n int64
	if c.rank == 0 {
		n = int64(len(b))
	}
	rows, err := c.gather([]int32{int32(n >> 31), int32(n & (1<<31 - 1))})
	if err != nil {
		return nil, err
	}
	n = int64(rows[0][0])<<31 | int64(rows[0][1])
	out := make([]byte, 0, n)
	for off := int64(0); off < n; off += broadcastChunk {
		m := min(broadcastChunk, n-off)
		chunk := make([]byte, m)
		if c.rank == 0 {
			copy(chunk, b[off:off+m])
		}
		s, err := c.allSum(mx.FromSlice(c.group.Engine(), chunk, []int{int(m)}, mx.Uint8))
		if err != nil {
			return nil, err
		}
		out = append(out, s[0].Raw().([]uint8)...)
	}
	return out, nil
}

// reduceBucket bounds the elements of one gradient all_sum on the ring and MPI
// (mlx-lm uses 32 MiB buckets too): one array per bucket keeps the ring's per-call
// latency off small LoRA matrices, and a bound keeps the packed copy small for full
// fine-tuning.
const reduceBucket = 8 << 20

// ncclBucket is NCCL's bound: it reduces a GPU buffer of any size at the link's speed,
// so a LoRA gradient (the real recipe's 9.3M floats among them) goes in one all_sum per
// step, and the bound only keeps a full fine-tune's packed copy at 1 GiB of float32.
const ncclBucket = 256 << 20

// sumArrays sums arrays over the ranks, together with a few host values (sent as
// float32), packing them into flat buckets of one dtype.
func (c *cluster) sumArrays(e mx.Engine, xs []*mx.Array, host []float64) ([]*mx.Array, []float64, error) {
	if c.size == 1 {
		return xs, host, nil
	}
	f := make([]float32, len(host))
	for i, v := range host {
		f[i] = float32(v)
	}
	items := append(append([]*mx.Array(nil), xs...), mx.FromFloat32(e, f, len(f)))
	bucket := reduceBucket
	if c.backend == "nccl" {
		bucket = ncclBucket
	}
	out := make([]*mx.Array, len(items))
	for start := 0; start < len(items); {
		end, n := start, 0
		for end < len(items) && items[end].DType() == items[start].DType() && (end == start || n+items[end].Size() <= bucket) {
			n += items[end].Size()
			end++
		}
		flat := make([]*mx.Array, end-start)
		var cuts []int
		off := 0
		for i, x := range items[start:end] {
			flat[i] = mx.Reshape(x, -1)
			off += x.Size()
			if start+i < end-1 {
				cuts = append(cuts, off)
			}
		}
		packed := flat[0]
		if len(flat) > 1 {
			packed = mx.Concatenate(flat, 0)
		}
		s, err := c.allSum(packed)
		if err != nil {
			return nil, nil, err
		}
		parts := []*mx.Array{s[0]}
		if len(cuts) > 0 {
			parts = mx.Split(s[0], cuts, 0)
		}
		for i, p := range parts {
			out[start+i] = mx.Reshape(p, items[start+i].Shape()...)
		}
		start = end
	}
	sum := out[len(out)-1].Float32s()
	res := make([]float64, len(sum))
	for i, v := range sum {
		res[i] = float64(v)
	}
	return out[:len(out)-1], res, nil
}

// sumStep sums a step's gradients and its host numbers — the examples' loss shares and
// tokens — over the ranks in one all_sum, together with whether each rank was asked to
// stop (stop: ctx cancelled on this rank), which it records for interrupted and stoppedBy.
func (c *cluster) sumStep(e mx.Engine, grads optim.Params, lossSum float64, tokens int64, stop bool) (optim.Params, float64, int64, error) {
	names := sortedNames(grads)
	host := make([]float64, 2+c.size)
	host[0], host[1] = lossSum, float64(tokens)
	if stop {
		host[2+c.rank] = 1
	}
	summed, host, err := c.sumArrays(e, paramValues(grads, names), host)
	if err != nil {
		return nil, 0, 0, err
	}
	for i, n := range names {
		grads[n] = summed[i]
	}
	c.stopBy = c.stopBy[:0]
	for rank, f := range host[2:] {
		if f > 0 {
			c.stopBy = append(c.stopBy, rank)
		}
	}
	return grads, host[0], int64(host[1]), nil
}

// interrupted reports whether the run stops after this step because of a signal: alone,
// when this process got one; distributed, when any rank had got one by the time of the
// step's all_sum, so every rank stops after the same step.
func (c *cluster) interrupted(ctx context.Context) bool {
	if c.size == 1 {
		return ctx.Err() != nil
	}
	return len(c.stopBy) > 0
}

// stoppedBy names the ranks whose signal stopped a distributed run.
func (c *cluster) stoppedBy() string {
	if c.size == 1 || len(c.stopBy) == 0 {
		return ""
	}
	names := make([]string, len(c.stopBy))
	for i, k := range c.stopBy {
		names[i] = strconv.Itoa(k)
	}
	return " (signal on rank " + strings.Join(names, ", ") + ")"
}

// timeStep starts timing a step; calling the function it returns adds the step's wall
// time and its time in collectives to the run's timing.
func (c *cluster) timeStep() func() {
	began, reduced := time.Now(), c.reduce
	return func() { c.timing.add(time.Since(began), c.reduce-reduced) }
}

// DistributedStats describe a distributed run's steps on this rank.
type DistributedStats struct {
	WorldSize int    `json:"world_size"`
	Backend   string `json:"backend"`
	Steps     int    `json:"steps"` // timed steps: all but the first, which includes warm-up
	// StepSeconds is the mean wall time of a step; AllReduceSeconds the part of it spent
	// in all_sum, waiting for the slowest rank included.
	StepSeconds      float64 `json:"step_seconds"`
	AllReduceSeconds float64 `json:"all_reduce_seconds"`
}

// stepTiming sums the steps' wall time and collective time, the first step apart.
type stepTiming struct {
	started        bool
	n              int
	step, reduce   time.Duration
	first, firstAR time.Duration
}

func (t *stepTiming) add(step, reduce time.Duration) {
	if !t.started {
		t.started, t.first, t.firstAR = true, step, reduce
		return
	}
	t.n++
	t.step += step
	t.reduce += reduce
}

// stats are the run's DistributedStats (nil alone), also written to log.
func (c *cluster) stats(log io.Writer) *DistributedStats {
	if c.size == 1 {
		return nil
	}
	t := c.timing
	n, step, reduce := t.n, t.step, t.reduce
	if n == 0 { // a single step: report it, warm-up and all
		n, step, reduce = 1, t.first, t.firstAR
	}
	d := &DistributedStats{
		WorldSize: c.size, Backend: c.backend, Steps: n,
		StepSeconds: step.Seconds() / float64(n), AllReduceSeconds: reduce.Seconds() / float64(n),
	}
	fmt.Fprintf(log, "distributed: %d ranks (%s): %.3f s per step, %.3f s of it in all_sum (%.1f%%, waiting for the slowest rank included), mean of %d steps\n",
		d.WorldSize, d.Backend, d.StepSeconds, d.AllReduceSeconds, 100*d.AllReduceSeconds/max(d.StepSeconds, 1e-12), d.Steps)
	return d
}
