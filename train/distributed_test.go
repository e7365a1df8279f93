package train

import (
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgtune/dgtune/mx"
	"github.com/dgtune/dgtune/mx/mxtest"
	"github.com/dgtune/dgtune/optim"
)

// twoRanks is the go engine dressed as a group of two ranks in which the other rank
// holds what this one holds: each all_sum returns twice its input. It records the
// number of elements of each all_sum.
type twoRanks struct {
	mx.Engine
	sums []int
}

func (e *twoRanks) HasBackend(string) bool { return true }

func (e *twoRanks) JoinGroup(string, bool) (mx.GroupImpl, error) { return twoRanksGroup{e}, nil }

type twoRanksGroup struct{ e *twoRanks }

func (g twoRanksGroup) Rank() int    { return 0 }
func (g twoRanksGroup) Size() int    { return 2 }
func (g twoRanksGroup) Close() error { return nil }

func (g twoRanksGroup) AllSum(x mx.Handle) mx.Handle {
	n := 1
	for _, d := range g.e.Shape(x) {
		n *= d
	}
	g.e.sums = append(g.e.sums, n)
	return g.e.Binary(mx.OpAdd, x, x)
}

// TestSumStepBuckets: a step's gradients and host numbers cross the group packed by
// dtype. On NCCL a LoRA gradient the size of the real recipe's (9,292,800 floats, more
// than one ring bucket) and the 4 host numbers (loss, tokens, a stop flag per rank) are
// one all_sum; on the ring the pack is cut at reduceBucket (8,388,608). Either way every
// tensor comes back summed, in its shape.
func TestSumStepBuckets(t *testing.T) {
	shapes := map[string][]int{"a.lora_a": {4096, 1024}, "b.lora_b": {4096, 1024}, "c.lora_a": {904192}}
	for _, tc := range []struct {
		backend string
		want    []int
	}{
		{"nccl", []int{9292800 + 4}},
		{"ring", []int{2 * 4194304, 904192 + 4}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			e := &twoRanks{Engine: mxtest.Go(t)}
			g, err := mx.JoinGroup(e, tc.backend, true)
			if err != nil {
				t.Fatal(err)
			}
			c := &cluster{rank: 0, size: 2, backend: tc.backend, group: g}
			grads := optim.Params{}
			for name, shape := range shapes {
				n := 1
				for _, d := range shape {
					n *= d
				}
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(i%7) - 2
				}
				grads[name] = mx.FromFloat32(e, v, shape...)
			}
			summed, loss, tokens, err := c.sumStep(e, grads, 1.5, 10, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.sums, tc.want) {
				t.Errorf("all_sums of %v elements, want %v", e.sums, tc.want)
			}
			if loss != 3 || tokens != 20 || !slices.Equal(c.stopBy, []int{0}) {
				t.Errorf("loss %v, tokens %d, stop by %v; want 3, 20, [0]", loss, tokens, c.stopBy)
			}
			for name, shape := range shapes {
				x := summed[name]
				if !slices.Equal(x.Shape(), shape) {
					t.Errorf("%s: shape %v, want %v", name, x.Shape(), shape)
					continue
				}
				v := x.Float32s()
				for _, i := range []int{0, 1, 6, 7, len(v) - 1} {
					if want := 2 * (float32(i%7) - 2); v[i] != want {
						t.Errorf("%s[%d] = %v, want %v", name, i, v[i], want)
					}
				}
			}
		})
	}
}

// pair is two ranks of one process, each with the go engine dressed as its own group of
// two: an all_sum waits for the other rank's and returns the elementwise sum of both,
// as MLX's collectives do between processes.
type pair struct {
	mu     sync.Mutex
	cond   *sync.Cond
	round  int        // all_sums completed
	parts  [2][]int32 // each rank's part of the current one
	joined int        // ranks that have given theirs
}

type pairEngine struct {
	mx.Engine
	p    *pair
	rank int
}

func (e *pairEngine) HasBackend(string) bool { return true }

func (e *pairEngine) JoinGroup(string, bool) (mx.GroupImpl, error) { return pairGroup{e}, nil }

type pairGroup struct{ e *pairEngine }

func (g pairGroup) Rank() int    { return g.e.rank }
func (g pairGroup) Size() int    { return 2 }
func (g pairGroup) Close() error { return nil }

// AllSum sums int32 arrays (the only dtype the side channel's set-up gathers).
func (g pairGroup) AllSum(x mx.Handle) mx.Handle {
	p, e := g.e.p, g.e.Engine
	v := e.ToSlice(x).([]int32)
	p.mu.Lock()
	round := p.round
	p.parts[g.e.rank] = v
	p.joined++
	if p.joined == 2 {
		p.joined = 0
		p.round++
		p.cond.Broadcast()
	}
	for p.round == round {
		p.cond.Wait()
	}
	other := p.parts[1-g.e.rank]
	p.mu.Unlock()
	sum := make([]int32, len(v))
	for i := range sum {
		sum[i] = v[i] + other[i]
	}
	return e.FromSlice(sum, e.Shape(x), mx.Int32)
}

// TestNCCLSideChannel: NCCL's variables name rank 0's host alone, so each rank reaches
// its neighbours on the address it reaches rank 0 from, exchanged over the group; a
// rank that fails then stops the other, named with that address.
func TestNCCLSideChannel(t *testing.T) {
	p := &pair{}
	p.cond = sync.NewCond(&p.mu)
	exits := make(chan error, 2)
	clusters := make([]*cluster, 2)
	var wg sync.WaitGroup
	for r := range clusters {
		e := &pairEngine{Engine: mxtest.Go(t), p: p, rank: r}
		g, err := mx.JoinGroup(e, "nccl", true)
		if err != nil {
			t.Fatal(err)
		}
		c := &cluster{rank: r, size: 2, backend: "nccl", coord: "127.0.0.1:29500", group: g, timeout: 5 * time.Second,
			log: io.Discard, done: make(chan struct{}), exit: func(err error) { exits <- err }}
		c.lastSaved.Store(-1)
		clusters[r] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.startWatch(); err != nil {
				t.Errorf("rank %d: startWatch: %v", r, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	clusters[1].watch.Fail(errors.New("disk full"))
	select {
	case err := <-exits:
		want := "distributed: rank 0 of 2 stops: rank 1 (127.0.0.1) failed: disk full; no checkpoint was written yet"
		if err.Error() != want {
			t.Errorf("rank 0 stops with %q, want %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rank 0 did not stop within 10 s of rank 1's failure")
	}
	for _, c := range clusters {
		close(c.done)
		c.watch.Close()
	}
}
