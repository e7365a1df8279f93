package tokenizer

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// merge is what one merge rule does: the pair (left, right) becomes id, and rules apply in
// increasing rank.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// Cache limits follow the library: words of 256 bytes or more are not cached, and the cache
// stops growing at 10,000 words. Caching never changes a result, only its cost.
const (
	cacheMaxWordLen = 256
	cacheCapacity   = 10000
)

type bpeModel struct {
	vocab        map[string]int32
	merges       map[uint64]merge
	unkID        int32 // -1 when there is no unknown token
	byteFallback bool
	byteIDs      [256]int32 // ids of <0x00>..<0xFF>, -1 when absent
	fuseUnk      bool
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	// asciiIDs short-cuts the vocab lookup of single ASCII characters; valid only when there
	// is no prefix or suffix to decorate them with.
	asciiIDs [128]int32

	mu    sync.RWMutex
	cache map[string][]int32

	adjOnce sync.Once
	adj     map[uint64]struct{}
}

func newBPE(vocab map[string]int32, mergeHint int, unk string, byteFallback, fuseUnk, ignoreMerges bool, prefix, suffix string) (*bpeModel, error) {
	m := &bpeModel{
		vocab:        vocab,
		merges:       make(map[uint64]merge, mergeHint),
		unkID:        -1,
		byteFallback: byteFallback,
		fuseUnk:      fuseUnk,
		ignoreMerges: ignoreMerges,
		prefix:       prefix,
		suffix:       suffix,
		cache:        make(map[string][]int32),
	}
	if unk != "" {
		id, ok := vocab[unk]
		if !ok {
			return nil, fmt.Errorf("%w: unk_token %q is not in the vocab", ErrBadModel, unk)
		}
		m.unkID = id
	}
	for b := 0; b < 256; b++ {
		id, ok := vocab[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			id = -1
		}
		m.byteIDs[b] = id
	}
	for c := 0; c < 128; c++ {
		id, ok := vocab[string(rune(c))]
		if !ok || prefix != "" || suffix != "" {
			id = -1
		}
		m.asciiIDs[c] = id
	}
	return m, nil
}

// addMerge registers the merge of the given rank. It takes byte slices so a load can look
// half a million merges up without allocating a string for each part.
func (m *bpeModel) addMerge(rank int, left, right []byte, buf []byte) ([]byte, error) {
	a, ok := m.vocab[string(left)]
	if !ok {
		return buf, fmt.Errorf("%w: merge %d (%q %q): %q is not in the vocab", ErrBadModel, rank, left, right, left)
	}
	b, ok := m.vocab[string(right)]
	if !ok {
		return buf, fmt.Errorf("%w: merge %d (%q %q): %q is not in the vocab", ErrBadModel, rank, left, right, right)
	}
	// The right part loses its continuing-subword prefix when glued on.
	if len(right) < len(m.prefix) {
		return buf, fmt.Errorf("%w: merge %d (%q %q): right part is shorter than continuing_subword_prefix %q", ErrBadModel, rank, left, right, m.prefix)
	}
	buf = append(append(buf[:0], left...), right[len(m.prefix):]...)
	id, ok := m.vocab[string(buf)]
	if !ok {
		return buf, fmt.Errorf("%w: merge %d (%q %q): result %q is not in the vocab", ErrBadModel, rank, left, right, buf)
	}
	// A repeated pair keeps its last rank, as the library's map insertion does.
	m.merges[pairKey(a, b)] = merge{rank: int32(rank), id: id}
	return buf, nil
}

// bpeScratch holds the buffers of one encode call so long words do not allocate per word.
type bpeScratch struct {
	syms []symbol
	heap mergeHeap
	segs []segment
}

type symbol struct {
	id         int32
	prev, next int32
	size       int32 // bytes of the original word it covers; 0 marks a merged-away symbol
}

// encodeWord appends the ids of one pre-tokenized word.
func (m *bpeModel) encodeWord(w string, dst []int32, sc *bpeScratch) []int32 {
	if w == "" {
		return dst
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(dst, id)
		}
	}
	if len(w) > splitMinLen && m.prefix == "" && m.suffix == "" && !m.ignoreMerges {
		return m.encodeLong(w, dst, sc)
	}
	return m.encodeCached(w, dst, sc)
}

func (m *bpeModel) encodeCached(w string, dst []int32, sc *bpeScratch) []int32 {
	cacheable := len(w) < cacheMaxWordLen
	if cacheable {
		m.mu.RLock()
		ids, ok := m.cache[w]
		m.mu.RUnlock()
		if ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	dst = m.mergeWord(w, dst, sc)
	if cacheable {
		ids := append([]int32(nil), dst[start:]...)
		m.mu.Lock()
		if len(m.cache) < cacheCapacity {
			m.cache[w] = ids
		}
		m.mu.Unlock()
	}
	return dst
}

// splitMinLen is the word length from which encodeLong looks for safe cut points.
const splitMinLen = 64

// encodeLong handles long words, typically a whole text under a Gemma-style tokenizer with
// no pre-tokenizer. It cuts the word where no merge can ever reach across, encodes the parts
// on their own (and through the cache), and so gives exactly the ids of one merge pass over
// the whole word at a fraction of its heap work.
//
// Why a cut between characters p and c is safe: p and c are vocab tokens, so the symbol
// left of the cut always spells a string ending in p and the symbol right of it one
// starting with c. Merging them would make a token whose string contains "pc"; if no vocab
// token contains "pc", that merge does not exist, and merges on each side never interact.
func (m *bpeModel) encodeLong(w string, dst []int32, sc *bpeScratch) []int32 {
	pairs := m.adjacent()
	start := 0
	var prev rune = -1
	prevKnown := false
	for i := 0; i < len(w); {
		r, n := utf8.DecodeRuneInString(w[i:])
		known := m.isCharToken(w[i : i+n])
		if i > start && prevKnown && known {
			if _, joined := pairs[pairKey(prev, r)]; !joined {
				dst = m.encodeCached(w[start:i], dst, sc)
				start = i
			}
		}
		prev, prevKnown = r, known
		i += n
	}
	return m.encodeCached(w[start:], dst, sc)
}

func (m *bpeModel) isCharToken(c string) bool {
	if len(c) == 1 && c[0] < utf8.RuneSelf {
		return m.asciiIDs[c[0]] >= 0
	}
	_, ok := m.vocab[c]
	return ok
}

// adjacent returns the set of character pairs (p, c) that occur side by side inside some
// vocab token. It is built on first use: short-word tokenizers never need it.
func (m *bpeModel) adjacent() map[uint64]struct{} {
	m.adjOnce.Do(func() {
		m.adj = make(map[uint64]struct{})
		for tok := range m.vocab {
			prev := rune(-1)
			for _, r := range tok {
				if prev >= 0 {
					m.adj[pairKey(prev, r)] = struct{}{}
				}
				prev = r
			}
		}
	})
	return m.adj
}

// mergeWord is the library's BPE::merge_word followed by Word::merge_all: characters to
// symbols (with byte fallback and unknown-token fusing), then repeatedly apply the
// lowest-ranked merge, leftmost first, using a heap of candidate pairs.
func (m *bpeModel) mergeWord(w string, dst []int32, sc *bpeScratch) []int32 {
	syms := sc.syms[:0]
	add := func(id int32, size int) {
		n := int32(len(syms))
		if n > 0 {
			syms[n-1].next = n
		}
		syms = append(syms, symbol{id: id, prev: n - 1, next: -1, size: int32(size)})
	}
	unkPending, unkSize := false, 0
	for i := 0; i < len(w); {
		c := w[i]
		var id int32 = -1
		var n int
		if c < utf8.RuneSelf {
			n = 1
			id = m.asciiIDs[c]
		} else {
			_, n = utf8.DecodeRuneInString(w[i:])
		}
		if id < 0 {
			s := w[i : i+n]
			if m.prefix != "" && i > 0 {
				s = m.prefix + s
			}
			if m.suffix != "" && i+n == len(w) {
				s += m.suffix
			}
			if v, ok := m.vocab[s]; ok {
				id = v
			} else if m.byteFallback && m.allBytes(s) {
				// The library adds the byte tokens without flushing a pending unknown token;
				// that ordering is kept.
				for k := 0; k < len(s); k++ {
					add(m.byteIDs[s[k]], 1)
				}
				i += n
				continue
			} else {
				if m.unkID >= 0 {
					switch {
					case unkPending && m.fuseUnk:
						unkSize += n
					case unkPending:
						add(m.unkID, unkSize)
						unkSize = n
					default:
						unkPending, unkSize = true, n
					}
				}
				i += n
				continue
			}
		}
		if unkPending {
			add(m.unkID, unkSize)
			unkPending = false
		}
		add(id, n)
		i += n
	}
	if unkPending {
		add(m.unkID, unkSize)
	}

	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = append(h, cand{rank: mg.rank, pos: int32(i), id: mg.id})
		}
	}
	h.init()
	for len(h) > 0 {
		top := h.pop()
		p := top.pos
		if syms[p].size == 0 || syms[p].next < 0 {
			continue
		}
		rpos := syms[p].next
		right := syms[rpos]
		// Skip candidates made stale by an earlier merge.
		if mg, ok := m.merges[pairKey(syms[p].id, right.id)]; !ok || mg.id != top.id {
			continue
		}
		syms[p].id = top.id
		syms[p].size += right.size
		syms[p].next = right.next
		syms[rpos].size = 0
		if right.next >= 0 {
			syms[right.next].prev = p
		}
		cur := syms[p]
		if cur.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(cand{rank: mg.rank, pos: cur.prev, id: mg.id})
			}
		}
		if cur.next >= 0 {
			if mg, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(cand{rank: mg.rank, pos: p, id: mg.id})
			}
		}
	}
	sc.heap = h
	sc.syms = syms
	for _, s := range syms {
		if s.size != 0 {
			dst = append(dst, s.id)
		}
	}
	return dst
}

func (m *bpeModel) allBytes(s string) bool {
	for k := 0; k < len(s); k++ {
		if m.byteIDs[s[k]] < 0 {
			return false
		}
	}
	return true
}

// cand is a merge candidate at a symbol position.
type cand struct {
	rank, pos, id int32
}

func (a cand) less(b cand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeHeap is a binary min-heap ordered by (rank, position), hand-rolled to avoid
// container/heap's interface calls in the hot loop.
type mergeHeap []cand

func (h mergeHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *mergeHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() cand {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	*h = s[:n]
	h.down(0)
	return top
}

func (h mergeHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
