package train

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/mx"
)

// agreeVersion changes whenever the rows agree compares change shape, so that ranks
// of different dgtune builds are told apart before they exchange anything else.
const agreeVersion = 1

// perMachineKeys may differ between ranks: paths on each machine, and what only rank 0
// (writing, resuming) or no rank at all (eval) uses.
var perMachineKeys = map[string]bool{
	"model": true, "data": true, "adapter_path": true, "resume": true, "backend": true,
	"distributed": true, "distributed_timeout": true,
}

func agreedKeys() []string {
	var out []string
	for _, k := range config.Keys() {
		if !perMachineKeys[k] && !strings.HasPrefix(k, "eval.") {
			out = append(out, k)
		}
	}
	return out
}

// agree checks that every rank is about to train the same thing: the same settings
// (paths aside), the same tokenized data and the same trainable tensors. Ranks that
// disagree would silently average unrelated gradients, so every rank stops with the
// same message naming what differs where.
func (c *cluster) agree(cfg config.Config, train, val []data.Pair, params map[string]*mx.Array) error {
	if c.size == 1 {
		return nil
	}
	keys := agreedKeys()
	head, err := c.gather([]int32{agreeVersion, int32(len(keys))})
	if err != nil {
		return err
	}
	for r, h := range head {
		if !slices.Equal(h, head[0]) {
			return fmt.Errorf("distributed: rank %d runs another dgtune build than rank 0 (%v vs %v): use the same binary on every machine", r, h, head[0])
		}
	}
	row := make([]int32, 0, len(keys)+6)
	for _, k := range keys {
		row = append(row, hash32(fmt.Sprint(config.Get(cfg, k))))
	}
	row = append(row, pairsDigest(train)...)
	row = append(row, pairsDigest(val)...)
	row = append(row, hash64([]byte(strings.Join(fingerprints(params), ";")))...)
	rows, err := c.gather(row)
	if err != nil {
		return err
	}
	var problems []string
	for r := 1; r < c.size; r++ {
		var diff []string
		for i, k := range keys {
			if rows[r][i] != rows[0][i] {
				diff = append(diff, k)
			}
		}
		n := len(keys)
		if !slices.Equal(rows[r][n:n+2], rows[0][n:n+2]) {
			diff = append(diff, "the train data")
		}
		if !slices.Equal(rows[r][n+2:n+4], rows[0][n+2:n+4]) {
			diff = append(diff, "the valid data")
		}
		if !slices.Equal(rows[r][n+4:n+6], rows[0][n+4:n+6]) {
			diff = append(diff, "the trainable tensors (model)")
		}
		if len(diff) > 0 {
			problems = append(problems, fmt.Sprintf("rank %d: %s", r, strings.Join(diff, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("distributed: the ranks would not train the same run; differing from rank 0: %s (start every rank with the same config, data and model)", strings.Join(problems, "; "))
	}
	return nil
}

func hash32(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32())
}

func hash64(b []byte) []int32 { return words(fnv64(b)) }

func fnv64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func words(v uint64) []int32 { return []int32{int32(v >> 32), int32(v)} }

// pairsDigest hashes the tokenized pairs, in order, one pair at a time.
func pairsDigest(pairs []data.Pair) []int32 {
	h := fnv.New64a()
	var b []byte
	for _, p := range pairs {
		b = binary.LittleEndian.AppendUint64(b[:0], uint64(p.Index))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Prompt)))
		for _, id := range p.Prompt {
			b = binary.LittleEndian.AppendUint32(b, uint32(id))
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Target)))
		for _, id := range p.Target {
			b = binary.LittleEndian.AppendUint32(b, uint32(id))
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Images)))
		h.Write(b)
	}
	return words(h.Sum64())
}

// sharedState is what rank 0 hands every rank at the start: its training state, if it
// resumes one (the other ranks may not even have the files), as JSON plus the raw
// bytes of its tensors.
type sharedState struct {
	Resume  bool           `json:"resume"`
	Error   string         `json:"error,omitempty"`
	State   *State         `json:"state,omitempty"`
	Tensors []sharedTensor `json:"tensors,omitempty"`
}

type sharedTensor struct {
	Name  string `json:"name"`
	Opt   bool   `json:"opt"` // optimizer state, not a parameter
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Size  int    `json:"size"` // bytes
}

// loadState is loadState on rank 0, handed to every rank: the ranks resume (or start
// fresh) together, from rank 0's files, bit for bit. Run alone, it reads the files.
func (c *cluster) loadState(e mx.Engine, dir string, resume bool) (State, map[string]*mx.Array, map[string]*mx.Array, error) {
	if c.size == 1 {
		if !resume {
			return State{}, nil, nil, errNoState
		}
		return loadState(e, dir)
	}
	var msg []byte
	if c.rank == 0 {
		msg = encodeShared(e, dir, resume)
	}
	msg, err := c.broadcast(msg)
	if err != nil {
		return State{}, nil, nil, err
	}
	return decodeShared(e, msg)
}

func encodeShared(e mx.Engine, dir string, resume bool) []byte {
	sh := sharedState{Resume: resume}
	var blob []byte
	if resume {
		st, params, opt, err := loadState(e, dir)
		switch {
		case errors.Is(err, errNoState):
			sh.Resume = false
		case err != nil:
			sh.Error = err.Error()
		default:
			sh.State = &st
			for _, group := range []struct {
				arrays map[string]*mx.Array
				opt    bool
			}{{params, false}, {opt, true}} {
				for _, n := range sortedNames(group.arrays) {
					a := group.arrays[n]
					b := mx.Bytes(a)
					sh.Tensors = append(sh.Tensors, sharedTensor{Name: n, Opt: group.opt, DType: a.DType().String(), Shape: a.Shape(), Size: len(b)})
					blob = append(blob, b...)
				}
			}
		}
	}
	js, err := json.Marshal(sh)
	if err != nil {
		js, _ = json.Marshal(sharedState{Error: err.Error()})
		blob = nil
	}
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(js))), append(js, blob...)...)
}

func decodeShared(e mx.Engine, msg []byte) (State, map[string]*mx.Array, map[string]*mx.Array, error) {
	fail := func(format string, args ...any) (State, map[string]*mx.Array, map[string]*mx.Array, error) {
		return State{}, nil, nil, fmt.Errorf("distributed: rank 0's training state: "+format, args...)
	}
	if len(msg) < 4 || int(binary.LittleEndian.Uint32(msg)) > len(msg)-4 {
		return fail("truncated")
	}
	n := int(binary.LittleEndian.Uint32(msg))
	var sh sharedState
	if err := json.Unmarshal(msg[4:4+n], &sh); err != nil {
		return fail("%v", err)
	}
	if sh.Error != "" {
		return State{}, nil, nil, fmt.Errorf("rank 0: %s", sh.Error)
	}
	if !sh.Resume || sh.State == nil {
		return State{}, nil, nil, errNoState
	}
	blob := msg[4+n:]
	params, opt := map[string]*mx.Array{}, map[string]*mx.Array{}
	for _, t := range sh.Tensors {
		dt, ok := dtypeNamed(t.DType)
		if !ok || t.Size > len(blob) {
			return fail("tensor %s: bad dtype %q or size %d", t.Name, t.DType, t.Size)
		}
		a := mx.FromBytes(e, blob[:t.Size], t.Shape, dt)
		blob = blob[t.Size:]
		if t.Opt {
			opt[t.Name] = a
		} else {
			params[t.Name] = a
		}
	}
	return *sh.State, params, opt, nil
}

func dtypeNamed(name string) (mx.DType, bool) {
	for d := mx.Float32; d <= mx.Bool; d++ {
		if d.String() == name {
			return d, true
		}
	}
	return 0, false
}
