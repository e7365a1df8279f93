package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// largeTokenizerJSON generates a Gemma-shaped tokenizer.json with nVocab tokens and nMerges
// merges: byte tokens, an alphabet, tokens grown by gluing random pairs (each with its merge),
// then extra merges that split existing tokens at other points, as real vocabularies have.
func largeTokenizerJSON(nVocab, nMerges int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var toks []string
	index := map[string]int{}
	add := func(s string) bool {
		if _, ok := index[s]; ok {
			return false
		}
		index[s] = len(toks)
		toks = append(toks, s)
		return true
	}
	for _, s := range []string{"<pad>", "<eos>", "<bos>", "<unk>", "\n"} {
		add(s)
	}
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b))
	}
	base := len(toks)
	for _, r := range "▁abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"()-éüß中文字😀" {
		add(string(r))
	}
	alphabet := toks[base:]
	var merges [][2]string
	merged := map[[2]string]bool{}
	// Grow breadth-first: every token in turn gets a few random characters appended, each
	// new token with the merge that makes it, so lengths grow like a real vocabulary's.
	for i := base; len(toks) < nVocab; i++ {
		fan := 8
		if i < base+len(alphabet) {
			fan = 4 * len(alphabet) // makes (nearly) every two-character string a token
		}
		for k := 0; k < fan && len(toks) < nVocab; k++ {
			p := [2]string{toks[i], alphabet[rng.IntN(len(alphabet))]}
			if add(p[0] + p[1]) {
				merges = append(merges, p)
				merged[p] = true
			}
		}
	}
	// Extra merges reach the same tokens through other split points, as "ab"+"c" and
	// "a"+"bc" both do in real files.
	for i := base; i < len(toks) && len(merges) < nMerges; i++ {
		t := toks[i]
		for k := range t {
			if k == 0 || len(merges) >= nMerges {
				continue
			}
			p := [2]string{t[:k], t[k:]}
			_, okA := index[p[0]]
			_, okB := index[p[1]]
			if okA && okB && !merged[p] {
				merged[p] = true
				merges = append(merges, p)
			}
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"version":"1.0","added_tokens":[`)
	for i := 0; i < 4; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"content":%q,"single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}`, i, toks[i])
	}
	b.WriteString(`],"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},"pre_tokenizer":null,`)
	b.WriteString(`"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]},`)
	b.WriteString(`"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":true,"vocab":{`)
	enc := func(s string) {
		j, _ := json.Marshal(s)
		b.Write(j)
	}
	for i, s := range toks {
		if i > 0 {
			b.WriteByte(',')
		}
		enc(s)
		fmt.Fprintf(&b, ":%d", i)
	}
	b.WriteString(`},"merges":[`)
	for i, m := range merges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		enc(m[0])
		b.WriteByte(',')
		enc(m[1])
		b.WriteByte(']')
	}
	b.WriteString("]}}")
	return b.Bytes()
}

var largeOnce = sync.OnceValue(func() []byte { return largeTokenizerJSON(262144, 500000) })

func BenchmarkLoad(b *testing.B) {
	data := largeOnce()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// benchText is English-like prose with some numbers, punctuation and non-ASCII.
func benchText(n int) string {
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("the of and to in a is that for it as was with be by on not he I this are or his from at which but have an they you were her she there been one all we their can has more will if no out so said what up its about into than them only would could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three Üben naïve café 中文 😀 2024, (test): 'quote'.")
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(12) == 0 {
			sb.WriteByte('\n')
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

func BenchmarkEncode(b *testing.B) {
	t, err := Parse(largeOnce())
	if err != nil {
		b.Fatal(err)
	}
	text := benchText(1 << 20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		t.Encode(text)
	}
}

func BenchmarkEncodeSynthetic(b *testing.B) {
	data, err := NewSynthetic(8192, SyntheticCorpus())
	if err != nil {
		b.Fatal(err)
	}
	t, err := Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	text := benchText(1 << 20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		t.Encode(text)
	}
}
