package tokenizer

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Layout of the tokenizers NewSynthetic writes. The special tokens sit at DiffusionGemma's
// real ids (spec §7.1) so a synthetic checkpoint's config can use the real numbers; the
// image tokens, whose real ids exceed a small vocabulary, take the three highest ids.
const (
	SyntheticPadID          = 0
	SyntheticEOSID          = 1
	SyntheticBOSID          = 2
	SyntheticUnkID          = 3
	SyntheticMaskID         = 4
	SyntheticToolResponseID = 50
	SyntheticChannelOpenID  = 100
	SyntheticChannelCloseID = 101
	SyntheticTurnOpenID     = 105
	SyntheticTurnCloseID    = 106
	// SyntheticNewlineID is "\n", as in the real vocabulary.
	SyntheticNewlineID = 107
	// SyntheticFirstByteID is <0x00>; <0xNN> is SyntheticFirstByteID+NN.
	SyntheticFirstByteID = 108
	// SyntheticSpaceID is "▁", the normalized space. It must be a token of its own: the
	// decoder turns "▁" into a space token by token, before byte fallback, so a space
	// spelled as three byte tokens would decode as "▁".
	SyntheticSpaceID = SyntheticFirstByteID + 256
	// SyntheticMinVocab holds the specials, "\n", the 256 byte tokens, "▁" and the 3 image
	// tokens.
	SyntheticMinVocab = SyntheticSpaceID + 1 + 3
)

// SyntheticImageIDs returns the ids of <|image> (begin of image), <|image|> (the soft-token
// placeholder) and <image|> (end of image) in a synthetic tokenizer of the given size.
func SyntheticImageIDs(vocabSize int) (boi, image, eoi int32) {
	v := int32(vocabSize)
	return v - 3, v - 2, v - 1
}

// syntheticSpecials names the special ids below SyntheticNewlineID; the others become
// <unusedN>.
func syntheticSpecials() map[int]string {
	return map[int]string{
		SyntheticPadID:          "<pad>",
		SyntheticEOSID:          "<eos>",
		SyntheticBOSID:          "<bos>",
		SyntheticUnkID:          "<unk>",
		SyntheticMaskID:         "<mask>",
		SyntheticToolResponseID: "<|tool_response>",
		SyntheticChannelOpenID:  "<|channel>",
		SyntheticChannelCloseID: "<channel|>",
		SyntheticTurnOpenID:     "<|turn>",
		SyntheticTurnCloseID:    "<turn|>",
	}
}

// SyntheticCorpus returns a small English corpus with chat-template words, enough to train
// a few hundred merges for test checkpoints.
func SyntheticCorpus() []string {
	return []string{
		"user\nmodel\nsystem\nthought\n",
		"What is 2+2? The answer is 4.",
		"Write a haiku about Apple Silicon.",
		"The quick brown fox jumps over the lazy dog.",
		"A diffusion model denoises a canvas of tokens in a few steps.",
		"Low-rank adapters train a small number of parameters on top of a frozen base model.",
		"The encoder reads the prompt and the decoder fills in the masked canvas.",
		"Describe this image in one short sentence. This is a solid gray square.",
		"You are a helpful assistant. Answer the question briefly and clearly.",
		"The capital of France is Paris. The capital of Italy is Rome.",
		"Tokens, merges, vocabulary and bytes: the tokenizer turns text into ids and back.",
		"def add(a, b):\n    return a + b\n",
		"1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 100 and 1000.",
		"Learning rate, batch size, iterations, loss and validation loss are reported.",
	}
}

// NewSynthetic builds a Gemma-style tokenizer.json: normalizer Replace(" "→"▁"), no
// pre-tokenizer, BPE with byte fallback over 256 <0xNN> tokens, and the decoder
// Sequence[Replace("▁"→" "), ByteFallback, Fuse]. The model's merges are trained by plain
// BPE on corpus (most frequent pair first, ties to the lexically smallest pair) until
// vocabSize is full; ids the corpus cannot fill become reserved <unusedN> special tokens.
// Any UTF-8 text encodes, through byte fallback where needed. The output depends only on
// the inputs.
func NewSynthetic(vocabSize int, corpus []string) ([]byte, error) {
	if vocabSize < SyntheticMinVocab {
		return nil, fmt.Errorf("tokenizer: synthetic vocab size %d is below the minimum %d (specials, newline, 256 bytes, ▁, 3 image tokens)", vocabSize, SyntheticMinVocab)
	}
	if vocabSize > maxID {
		return nil, fmt.Errorf("tokenizer: synthetic vocab size %d exceeds %d", vocabSize, maxID)
	}
	boi, image, eoi := SyntheticImageIDs(vocabSize)
	specials := syntheticSpecials()
	specials[int(boi)] = "<|image>"
	specials[int(image)] = "<|image|>"
	specials[int(eoi)] = "<image|>"

	toks := make([]string, 0, vocabSize)
	special := make([]bool, vocabSize)
	unused := 0
	reserve := func() {
		toks = append(toks, fmt.Sprintf("<unused%d>", unused))
		special[len(toks)-1] = true
		unused++
	}
	for id := 0; id < SyntheticNewlineID; id++ {
		if s, ok := specials[id]; ok {
			toks = append(toks, s)
			special[id] = true
		} else {
			reserve()
		}
	}
	toks = append(toks, "\n")
	for b := 0; b < 256; b++ {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
	}
	toks = append(toks, "▁")
	limit := int(boi) // first id the trainer may not use
	merges := trainBPE(&toks, limit, corpus, specials)
	for len(toks) < limit {
		reserve()
	}
	toks = append(toks, specials[int(boi)], specials[int(image)], specials[int(eoi)])
	special[boi], special[image], special[eoi] = true, true, true
	return writeSyntheticJSON(toks, special, merges)
}

// trainBPE appends the corpus alphabet and then merged tokens to toks until it holds limit
// tokens or no pair is left, and returns the merges in rank order.
func trainBPE(toks *[]string, limit int, corpus []string, specials map[int]string) [][2]string {
	index := make(map[string]int32, limit)
	for i, s := range *toks {
		index[s] = int32(i)
	}
	// Words: the normalized text cut at newlines and before each ▁, as the encoder would
	// see word starts. Special token strings are cut out first.
	counts := map[string]int{}
	for _, text := range corpus {
		for _, s := range specials {
			text = strings.ReplaceAll(text, s, "\n")
		}
		text = strings.ReplaceAll(text, " ", "▁")
		for _, line := range strings.Split(text, "\n") {
			for _, w := range splitBefore(line, "▁") {
				counts[w]++
			}
		}
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	slices.Sort(words)

	// Alphabet: most frequent characters first while room remains.
	charCount := map[rune]int{}
	for _, w := range words {
		for _, r := range w {
			charCount[r] += counts[w]
		}
	}
	chars := make([]rune, 0, len(charCount))
	for r := range charCount {
		if _, taken := index[string(r)]; !taken {
			chars = append(chars, r)
		}
	}
	slices.SortFunc(chars, func(a, b rune) int {
		return cmp.Or(cmp.Compare(charCount[b], charCount[a]), cmp.Compare(a, b))
	})
	for _, r := range chars {
		if len(*toks) >= limit {
			break
		}
		index[string(r)] = int32(len(*toks))
		*toks = append(*toks, string(r))
	}

	// Each word as symbols; a character outside the alphabet is a barrier (-1) no merge
	// crosses, since at encode time it falls back to bytes.
	syms := make([][]int32, len(words))
	freq := make([]int, len(words))
	for i, w := range words {
		freq[i] = counts[w]
		for _, r := range w {
			id, ok := index[string(r)]
			if !ok {
				id = -1
			}
			syms[i] = append(syms[i], id)
		}
	}

	tr := &trainer{toks: toks, count: map[uint64]int{}, where: map[uint64][]int{}}
	for i := range syms {
		tr.addPairs(syms[i], freq[i], i)
	}
	for k := range tr.count {
		tr.touched = append(tr.touched, k)
	}
	tr.pushTouched()

	var merges [][2]string
	done := map[uint64]bool{}
	stamp := make([]int, len(words))
	round := 0
	for len(*toks) < limit {
		key, ok := tr.best()
		if !ok {
			break
		}
		a, b := int32(key>>32), int32(uint32(key))
		s := (*toks)[a] + (*toks)[b]
		id, exists := index[s]
		if !exists {
			id = int32(len(*toks))
			index[s] = id
			*toks = append(*toks, s)
		}
		if !done[key] {
			done[key] = true
			merges = append(merges, [2]string{(*toks)[a], (*toks)[b]})
		}
		round++
		for _, w := range tr.where[key] {
			if stamp[w] == round {
				continue
			}
			stamp[w] = round
			if !hasPair(syms[w], a, b) {
				continue
			}
			tr.removePairs(syms[w], freq[w])
			syms[w] = applyMerge(syms[w], a, b, id)
			tr.addPairs(syms[w], freq[w], w)
		}
		tr.pushTouched()
	}
	return merges
}

func splitBefore(s, sep string) []string {
	var out []string
	for s != "" {
		i := strings.Index(s[1:], sep)
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func hasPair(w []int32, a, b int32) bool {
	for i := 0; i+1 < len(w); i++ {
		if w[i] == a && w[i+1] == b {
			return true
		}
	}
	return false
}

func applyMerge(w []int32, a, b, id int32) []int32 {
	out := w[:0]
	for i := 0; i < len(w); i++ {
		if i+1 < len(w) && w[i] == a && w[i+1] == b {
			out = append(out, id)
			i++
			continue
		}
		out = append(out, w[i])
	}
	return out
}

// trainer keeps pair counts up to date and a lazy max-heap over them.
type trainer struct {
	toks    *[]string
	count   map[uint64]int
	where   map[uint64][]int // words that contained the pair at some point
	touched []uint64
	h       pairHeap
}

func (t *trainer) addPairs(w []int32, f, word int) {
	for i := 0; i+1 < len(w); i++ {
		if w[i] < 0 || w[i+1] < 0 {
			continue
		}
		k := pairKey(w[i], w[i+1])
		t.count[k] += f
		t.where[k] = append(t.where[k], word)
		t.touched = append(t.touched, k)
	}
}

func (t *trainer) removePairs(w []int32, f int) {
	for i := 0; i+1 < len(w); i++ {
		if w[i] < 0 || w[i+1] < 0 {
			continue
		}
		k := pairKey(w[i], w[i+1])
		t.count[k] -= f
		t.touched = append(t.touched, k)
	}
}

func (t *trainer) pushTouched() {
	for _, k := range t.touched {
		if c := t.count[k]; c > 0 {
			a, b := int32(k>>32), int32(uint32(k))
			heap.Push(&t.h, pairEntry{key: k, count: c, left: (*t.toks)[a], right: (*t.toks)[b]})
		}
	}
	t.touched = t.touched[:0]
}

// best pops entries until one matches the pair's current count.
func (t *trainer) best() (uint64, bool) {
	for t.h.Len() > 0 {
		e := heap.Pop(&t.h).(pairEntry)
		if t.count[e.key] == e.count && e.count > 0 {
			return e.key, true
		}
	}
	return 0, false
}

type pairEntry struct {
	key         uint64
	count       int
	left, right string
}

type pairHeap []pairEntry

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count > h[j].count
	}
	if h[i].left != h[j].left {
		return h[i].left < h[j].left
	}
	return h[i].right < h[j].right
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairEntry)) }
func (h *pairHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func writeSyntheticJSON(toks []string, special []bool, merges [][2]string) ([]byte, error) {
	var b bytes.Buffer
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false) // keep "<bos>" readable instead of "\u003cbos\u003e"
	str := func(s string) {
		tmp.Reset()
		if err := enc.Encode(s); err != nil {
			panic(err) // a Go string always encodes
		}
		b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
	}
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	first := true
	for id, s := range toks {
		if !special[id] {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": ", id)
		str(s)
		b.WriteString(", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}")
	}
	b.WriteString("\n  ],\n")
	b.WriteString(`  "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
  "model": {
    "type": "BPE",
    "dropout": null,
    "unk_token": "<unk>",
    "continuing_subword_prefix": null,
    "end_of_word_suffix": null,
    "fuse_unk": true,
    "byte_fallback": true,
    "ignore_merges": false,
    "vocab": {`)
	for id, s := range toks {
		if id > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      ")
		str(s)
		fmt.Fprintf(&b, ": %d", id)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      [")
		str(m[0])
		b.WriteString(", ")
		str(m[1])
		b.WriteByte(']')
	}
	b.WriteString("\n    ]\n  }\n}\n")
	return b.Bytes(), nil
}
