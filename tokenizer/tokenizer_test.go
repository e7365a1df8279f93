package tokenizer

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// testdata/gemma_style.json is the Gemma layout in miniature: Replace(" "→"▁"), no
// pre-tokenizer, BPE with byte fallback and fused unk, legacy "a b" merges, and the decoder
// Sequence[Replace("▁"→" "), ByteFallback, Fuse]. Ids: <pad>0 <eos>1 <bos>2 <unk>3 <|turn>4
// <turn|>5 ▁6 h7 e8 l9 o10 w11 r12 d13 \n14 ▁h15 ll16 ▁he17 ▁hell18 ▁hello19 or20 ▁w21
// ▁wor22 ▁worl23 ▁world24, bytes <0xE2>25 <0x82>26 <0xAC>27 <0xF0>28 <0x9F>29 <0x98>30
// <0x80>31, <|image|>32. Merges by rank: ▁ h, l l, ▁h e, ▁he ll, ▁hell o, o r, ▁ w, ▁w or,
// ▁wor l, ▁worl d.
func gemmaStyle(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load("testdata/gemma_style.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestGemmaStyleEncode(t *testing.T) {
	tok := gemmaStyle(t)
	cases := []struct {
		in   string
		want []int32
	}{
		// "▁hello▁world": ▁h, ll, ▁he, ▁hell, ▁hello by rank; then or, ▁w, ▁wor, ▁worl, ▁world.
		{" hello world", []int32{19, 24}},
		// No leading space: no "h e" merge, only l l → h, e, ll, o.
		{"hello", []int32{7, 8, 16, 10}},
		// "\n" is a token; "world" without ▁ only gets "or".
		{"hello\nworld", []int32{7, 8, 16, 10, 14, 11, 20, 9, 13}},
		// Special tokens are cut out before normalization, even glued to words.
		{"<bos><|turn> hello<turn|>", []int32{2, 4, 19, 5}},
		{"<|image|> hello", []int32{32, 19}},
		// "€" is E2 82 AC, all byte tokens present → byte fallback.
		{"€", []int32{25, 26, 27}},
		// "😀" is F0 9F 98 80.
		{"😀", []int32{28, 29, 30, 31}},
		// "é" (C3 A9) has no byte tokens → unk; fuse_unk merges neighbouring unknowns.
		{"éé", []int32{3}},
		{"é é", []int32{3, 6, 3}},
		// Whitespace runs: every space is a ▁ and there is no ▁▁ merge.
		{"  \n  ", []int32{6, 6, 14, 6, 6}},
		{"", []int32{}},
	}
	for _, c := range cases {
		if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%#q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestGemmaStyleDecode(t *testing.T) {
	tok := gemmaStyle(t)
	cases := []struct {
		ids  []int32
		skip bool
		want string
	}{
		{[]int32{19, 24}, false, " hello world"},
		{[]int32{2, 19, 1}, false, "<bos> hello<eos>"},
		{[]int32{2, 19, 1}, true, " hello"},
		// E2 82 AC 80 is one run of byte tokens and not UTF-8 as a whole: the library
		// gives one U+FFFD per byte token, even for the valid "€" inside it.
		{[]int32{25, 26, 27, 31}, false, "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{[]int32{25, 26, 27, 7, 31}, false, "€h\uFFFD"},
		{[]int32{99, -1, 7}, false, "h"}, // unknown ids are skipped
		{nil, false, ""},
	}
	for _, c := range cases {
		if got := tok.Decode(c.ids, c.skip); got != c.want {
			t.Errorf("Decode(%v, %v) = %#q, want %#q", c.ids, c.skip, got, c.want)
		}
	}
}

func TestLookups(t *testing.T) {
	tok := gemmaStyle(t)
	if id, ok := tok.TokenID("<bos>"); !ok || id != 2 {
		t.Errorf("TokenID(<bos>) = %d, %v, want 2, true", id, ok)
	}
	if id, ok := tok.TokenID("▁hello"); !ok || id != 19 {
		t.Errorf("TokenID(▁hello) = %d, %v, want 19, true", id, ok)
	}
	if _, ok := tok.TokenID("nope"); ok {
		t.Errorf("TokenID(nope) found")
	}
	if got := tok.Token(24); got != "▁world" {
		t.Errorf("Token(24) = %q, want ▁world", got)
	}
	if got := tok.Token(33); got != "" {
		t.Errorf("Token(33) = %q, want empty", got)
	}
	// Ids 0..32 are used.
	if got := tok.VocabSize(); got != 33 {
		t.Errorf("VocabSize() = %d, want 33", got)
	}
}

func bpeJSON(model string) string {
	return `{"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,"decoder":{"type":"Fuse"},"model":` + model + `}`
}

func TestBPEOptions(t *testing.T) {
	cases := []struct {
		name  string
		model string
		in    string
		want  []int32
	}{
		{"unk not fused", `{"type":"BPE","unk_token":"<unk>","fuse_unk":false,"vocab":{"<unk>":0,"a":1},"merges":[]}`, "xya", []int32{0, 0, 1}},
		{"unk fused", `{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"vocab":{"<unk>":0,"a":1},"merges":[]}`, "xya", []int32{0, 1}},
		// "é" is C3 A9; <0xA9> is missing, so byte fallback gives up and unk stands in.
		{"partial byte fallback", `{"type":"BPE","unk_token":"<unk>","byte_fallback":true,"vocab":{"<unk>":0,"a":1,"<0xC3>":2},"merges":[]}`, "éa", []int32{0, 1}},
		// ignore_merges: a word that is a token is taken whole...
		{"ignore merges", `{"type":"BPE","ignore_merges":true,"vocab":{"a":0,"b":1,"c":2,"ab":3,"bc":4,"abc":5},"merges":["b c","a b"]}`, "abc", []int32{5}},
		// ...otherwise (b,c) rank 0 wins, and no merge joins a with bc.
		{"merges", `{"type":"BPE","ignore_merges":false,"vocab":{"a":0,"b":1,"c":2,"ab":3,"bc":4,"abc":5},"merges":["b c","a b"]}`, "abc", []int32{0, 4}},
		// Non-initial characters carry the prefix; a merge drops the right part's prefix.
		{"continuing subword prefix", `{"type":"BPE","continuing_subword_prefix":"##","vocab":{"a":0,"##b":1,"##c":2,"ab":3,"abc":4},"merges":[["a","##b"],["ab","##c"]]}`, "abc", []int32{4}},
		{"prefix on later chars only", `{"type":"BPE","continuing_subword_prefix":"##","vocab":{"a":0,"##b":1,"##c":2,"ab":3,"abc":4},"merges":[["a","##b"],["ab","##c"]]}`, "cb", []int32{1}},
		// The last character carries the suffix: "a", "b</w>" → "ab</w>".
		{"end of word suffix", `{"type":"BPE","end_of_word_suffix":"</w>","vocab":{"a":0,"b</w>":1,"ab</w>":2,"b":3},"merges":[["a","b</w>"]]}`, "ab", []int32{2}},
		{"suffix only at the end", `{"type":"BPE","end_of_word_suffix":"</w>","vocab":{"a":0,"b</w>":1,"ab</w>":2,"b":3},"merges":[["a","b</w>"]]}`, "ba", []int32{3}},
		// A repeated merge pair keeps its last rank: "b c" at rank 2 now loses to "a b".
		{"repeated merge keeps last rank", `{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"ab":3,"bc":4},"merges":["b c","a b","b c"]}`, "abc", []int32{3, 2}},
		{"dropout zero", `{"type":"BPE","dropout":0.0,"vocab":{"a":0},"merges":[]}`, "a", []int32{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok, err := Parse([]byte(bpeJSON(c.model)))
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
				t.Errorf("Encode(%#q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	ok := `{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`
	withModel := func(extra string) string {
		return `{` + extra + `"model":` + ok + `}`
	}
	cases := []struct {
		name string
		data string
		want error
		msg  string
	}{
		{"empty", ``, ErrSyntax, "end of input"},
		{"not json", `tokenizer`, ErrSyntax, "offset 0"},
		{"truncated", `{"model":{"type":"BPE","vocab":{"a":0`, ErrSyntax, "end of input"},
		{"trailing data", withModel("") + `x`, ErrSyntax, "after the top-level object"},
		{"no model", `{"normalizer":null}`, ErrSyntax, "no model"},
		{"null model", `{"model":null}`, ErrSyntax, "no model"},
		{"unknown model type", `{"model":{"type":"Unigram","unk_id":0,"vocab":[["a",0.0]]}}`, ErrUnsupported, `"Unigram"`},
		{"wordpiece", `{"model":{"type":"WordPiece","vocab":{"a":0}}}`, ErrUnsupported, `"WordPiece"`},
		{"untyped model", `{"model":{"vocab":{"a":0}}}`, ErrSyntax, "type"},
		{"merge token missing", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}`, ErrBadModel, `"b" is not in the vocab`},
		{"merge result missing", `{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[["a","b"]]}}`, ErrBadModel, `result "ab"`},
		{"merge line shape", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b c"]}}`, ErrSyntax, "merges[0]"},
		{"merge pair shape", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","b","c"]]}}`, ErrSyntax, "3 parts"},
		{"merges not array", `{"model":{"type":"BPE","vocab":{"a":0},"merges":7}}`, ErrSyntax, "want '['"},
		{"no merges", `{"model":{"type":"BPE","vocab":{"a":0}}}`, ErrSyntax, "no merges"},
		{"no vocab", `{"model":{"type":"BPE","merges":[]}}`, ErrSyntax, "no vocab"},
		{"negative id", `{"model":{"type":"BPE","vocab":{"a":-1},"merges":[]}}`, ErrBadModel, "outside"},
		{"fractional id", `{"model":{"type":"BPE","vocab":{"a":1.5},"merges":[]}}`, ErrSyntax, "integer"},
		{"shared id", `{"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}`, ErrBadModel, "share id 0"},
		{"unk missing", `{"model":{"type":"BPE","unk_token":"<unk>","vocab":{"a":0},"merges":[]}}`, ErrBadModel, "unk_token"},
		{"dropout", `{"model":{"type":"BPE","dropout":0.1,"vocab":{"a":0},"merges":[]}}`, ErrUnsupported, "dropout"},
		{"version", withModel(`"version":"2.0",`), ErrUnsupported, "version"},
		{"unsupported normalizer", withModel(`"normalizer":{"type":"Precompiled","precompiled_charsmap":""},`), ErrUnsupported, `normalizer: normalizer type "Precompiled"`},
		{"unsupported nested pre-tokenizer", withModel(`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"Punctuation","behavior":"Isolated"}]},`), ErrUnsupported, `pre_tokenizer.pretokenizers[1]: pre-tokenizer type "Punctuation"`},
		{"unsupported decoder", withModel(`"decoder":{"type":"CTC"},`), ErrUnsupported, `decoder type "CTC"`},
		{"untyped component", withModel(`"decoder":{"content":" "},`), ErrSyntax, `decoder has no "type"`},
		{"bad behavior", withModel(`"pre_tokenizer":{"type":"Split","pattern":{"String":"-"},"behavior":"Sideways","invert":false},`), ErrUnsupported, "Sideways"},
		{"bad regex", withModel(`"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(a"},"behavior":"Isolated","invert":false},`), ErrSyntax, "pattern"},
		{"pattern both", withModel(`"normalizer":{"type":"Replace","pattern":{"String":"a","Regex":"b"},"content":""},`), ErrSyntax, "exactly one"},
		{"metaspace replacement", withModel(`"pre_tokenizer":{"type":"Metaspace","replacement":"ab"},`), ErrSyntax, "one character"},
		{"metaspace scheme", withModel(`"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"sometimes"},`), ErrUnsupported, "sometimes"},
		{"added token id taken", withModel(`"added_tokens":[{"id":1,"content":"<x>","special":true}],`), ErrBadModel, `gives to "b"`},
		{"added tokens shape", withModel(`"added_tokens":{"id":1},`), ErrSyntax, "added_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.data))
			if !errors.Is(err, c.want) {
				t.Fatalf("Parse error = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("Parse error = %q, want it to mention %q", err, c.msg)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.json")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load error = %v, want os.ErrNotExist", err)
	}
}

func TestLoadNamesFileInError(t *testing.T) {
	path := t.TempDir() + "/tokenizer.json"
	if err := os.WriteFile(path, []byte(`{"model":{"type":"Unigram"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, ErrUnsupported) {
		t.Errorf("Load error = %v, want ErrUnsupported naming %s", err, path)
	}
}

func TestCompileRegexEngine(t *testing.T) {
	cases := []struct {
		pat       string
		backtrack bool
	}{
		{`\s+`, false},
		{`[^\s\p{L}]+`, false},
		{`\s+(?!\S)`, true},
		{`(?<=a)b`, true},
		{`(a)\1`, true},
		{`[\S]`, true}, // a negated shorthand inside a class keeps regexp2's reading
	}
	for _, c := range cases {
		p, err := compileRegex(c.pat)
		if err != nil {
			t.Fatalf("compileRegex(%#q): %v", c.pat, err)
		}
		if _, got := p.(regexp2Pattern); got != c.backtrack {
			t.Errorf("compileRegex(%#q) uses backtracking = %v, want %v", c.pat, got, c.backtrack)
		}
	}
	// Oniguruma's shorthands are Unicode-aware on both engines: U+3000 is \s, "é" and the
	// Arabic-Indic digit "٣" are \w.
	for _, pat := range []string{`\s`, `\s(?!x)`} {
		p, _ := compileRegex(pat)
		segs := p.findMatches("a\u3000b", nil)
		want := []segment{{0, 1, false}, {1, 4, true}, {4, 5, false}}
		if !slices.Equal(segs, want) {
			t.Errorf("%#q on a U+3000 b: %v, want %v", pat, segs, want)
		}
	}
	for _, pat := range []string{`\w+`, `\w+(?!x)`} {
		p, _ := compileRegex(pat)
		segs := p.findMatches("é٣ z", nil)
		want := []segment{{0, 4, true}, {4, 5, false}, {5, 6, true}}
		if !slices.Equal(segs, want) {
			t.Errorf("%#q on é٣ z: %v, want %v", pat, segs, want)
		}
	}
}

// The hand-written GPT-2 splitter must agree with the regex it replaces.
func TestGPT2PatternMatchesRegex(t *testing.T) {
	re, err := compileRegex(`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`)
	if err != nil {
		t.Fatal(err)
	}
	alphabet := []string{"a", "Z", "é", "中", "1", "½", "٣", "'", "s", "ll", "re", "!", "-", " ", " ", "  ", "\t", "\n", "\u3000", "\u0301", "😀", "_"}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		got := gpt2Pattern{}.findMatches(s, nil)
		want := re.findMatches(s, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("on %q: hand-written %v, regex %v", s, got, want)
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	cases := []struct {
		in   []byte
		want string
	}{
		{[]byte("ok"), "ok"},
		// E2 82 is a truncated 3-byte sequence: one U+FFFD for the maximal prefix.
		{[]byte{0xE2, 0x82, 'a'}, "\uFFFDa"},
		// 0x80 alone and 0xFF are each their own ill-formed subpart.
		{[]byte{0x80, 0xFF}, "\uFFFD\uFFFD"},
		// ED A0 is a surrogate prefix: ED is ill-formed on its own, A0 too.
		{[]byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
	}
	for _, c := range cases {
		if got := lossyUTF8(c.in); got != c.want {
			t.Errorf("lossyUTF8(% x) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestInvalidUTF8Input(t *testing.T) {
	tok := syntheticTokenizer(t)
	// The lone 0xFF byte is read as U+FFFD, EF BF BD in byte tokens.
	got := tok.Encode("\xff")
	want := []int32{SyntheticFirstByteID + 0xEF, SyntheticFirstByteID + 0xBF, SyntheticFirstByteID + 0xBD}
	if !slices.Equal(got, want) {
		t.Errorf("Encode(\\xff) = %v, want %v", got, want)
	}
}

var syntheticOnce sync.Map // vocab size -> *Tokenizer, so tests build each size once

func syntheticTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	if v, ok := syntheticOnce.Load(1024); ok {
		return v.(*Tokenizer)
	}
	data, err := NewSynthetic(1024, SyntheticCorpus())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := syntheticOnce.LoadOrStore(1024, tok)
	return v.(*Tokenizer)
}

// roundTrips reports whether Decode(Encode(s)) gives s back. Gemma-style tokenizers cannot
// round-trip a literal "▁": the normalizer leaves it alone and the decoder turns it into a
// space, exactly as the real Gemma tokenizer does.
func roundTrips(tok *Tokenizer, s string) (string, bool) {
	got := tok.Decode(tok.Encode(s), false)
	return got, got == s
}

func TestRoundTrip(t *testing.T) {
	tok := syntheticTokenizer(t)
	for _, s := range []string{
		"",
		" ",
		"   leading and trailing   ",
		"What is 2+2?\n\n\tTabs\r\nand CRLF",
		"e\u0301 combining, ñ precomposed, Å angstrom",
		"emoji 😀 family 👩‍👩‍👧 flag 🇫🇷",
		"中文字符 日本語 한국어 العربية",
		"<bos><|turn>user\nhi<turn|>\n<|image|>",
		"<unused3> and <0x41> literally",
		strings.Repeat("the quick brown fox ", 5000),
	} {
		if got, ok := roundTrips(tok, s); !ok {
			t.Errorf("Decode(Encode(%.60q)) = %.60q", s, got)
		}
	}
}

func TestVeryLongInput(t *testing.T) {
	tok := syntheticTokenizer(t)
	text := benchText(1 << 20)
	ids := tok.Encode(text)
	if len(ids) == 0 || len(ids) > len(text) {
		t.Fatalf("Encode(1 MiB) gave %d ids", len(ids))
	}
	if got, ok := roundTrips(tok, text); !ok {
		t.Errorf("1 MiB round trip differs at byte %d", firstDiff(got, text))
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// encodeLong cuts long words; the ids must equal one merge pass over the whole word.
func TestLongWordCutsAreExact(t *testing.T) {
	big, err := Parse(largeTokenizerJSON(20000, 40000))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	extra := []string{"▁", "▁▁", "é", "中", "😀", "\n", "ab", "Z9", "??"}
	for _, tok := range []*Tokenizer{syntheticTokenizer(t), big} {
		for i := 0; i < 50; i++ {
			var b strings.Builder
			for b.Len() < 2000 {
				if rng.IntN(3) == 0 {
					b.WriteString(extra[rng.IntN(len(extra))])
				} else {
					b.WriteString(tok.Token(int32(SyntheticFirstByteID + 257 + rng.IntN(tok.VocabSize()-SyntheticFirstByteID-300))))
				}
			}
			w := b.String()
			sc := &bpeScratch{}
			cut := tok.model.encodeLong(w, nil, sc)
			whole := tok.model.mergeWord(w, nil, sc)
			if !slices.Equal(cut, whole) {
				t.Fatalf("word %.80q: cut %v\nwhole %v", w, cut, whole)
			}
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := syntheticTokenizer(t)
	texts := []string{benchText(3000), "hello world", "<bos>user", benchText(500)}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for k := 0; k < 20; k++ {
				i := (g + k) % len(texts)
				if got := tok.Encode(texts[i]); !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d: Encode differs", g)
					return
				}
			}
		})
	}
	wg.Wait()
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "hello world", " a  b\n", "é😀中", "<bos>x<turn|>", "\x00\x7f", "<0xE2>"} {
		f.Add(s)
	}
	tok := syntheticTokenizer(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.Contains(s, "▁") {
			t.Skip("invalid UTF-8 and a literal ▁ cannot round-trip (see roundTrips)")
		}
		if got, ok := roundTrips(tok, s); !ok {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

// FuzzParse checks that no input makes Parse panic, and that whatever parses can encode.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/gemma_style.json", "testdata/chars.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+(?!\\S)"},"behavior":"Contiguous","invert":true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		ids := tok.Encode("a b\u00e9 <x>")
		tok.Decode(ids, true)
	})
}

func TestJSONEscapes(t *testing.T) {
	// Keys spelled with escapes: \u00e9 is "é", the surrogate pair \ud83d\ude00 is "😀", a
	// lone surrogate reads as U+FFFD, and \" \\ \/ \t are the usual characters.
	data := `{"model":{"type":"BPE","vocab":{"\u00e9":0,"\ud83d\ude00":1,"\ud800":2,"\"\\\/\t":3,"a":4,"b":5,"ab":6},` +
		`"merges":["a b"]}, "added_tokens": [], "post_processor": {"ignored": [1, 2.5e3, true, null, "x\u0041"]}}`
	tok, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	got := tok.Encode("é😀\uFFFDab")
	want := []int32{0, 1, 2, 6}
	if !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if id, ok := tok.TokenID("\"\\/\t"); !ok || id != 3 {
		t.Errorf("TokenID(%q) = %d, %v, want 3", "\"\\/\t", id, ok)
	}
	for _, bad := range []string{
		`{"model":{"type":"BPE","vocab":{"a\q":0},"merges":[]}}`,
		`{"model":{"type":"BPE","vocab":{"a\u00":0},"merges":[]}}`,
		"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\x01\":0},\"merges\":[]}}",
		`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"x":[1,}`,
		`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"x":tru}`,
	} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want ErrSyntax", bad, err)
		}
	}
}
