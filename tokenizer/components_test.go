package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// testdata/chars.json is a character-level BPE: every printable ASCII character c has id
// c-32 (' '=0, '-'=13, '1'=17, 'a'=65, 'b'=66, 'x'=88 ...), '▁'=95, 'Ġ'=102, and the
// byte tokens <0x41>=104, <0xE2>=105, <0x82>=106, <0xAC>=107. Its merges, by rank:
//
//	0: a -  → a-  96      4: b ▁  → b▁ 100
//	1: - b  → -b  97      5: a a  → aa 101
//	2: ▁ a  → ▁a  98      6: 1 2  → 12 103
//	3: a b  → ab  99
//
// It has no unk token and no byte fallback, so a character outside the vocab is dropped.
// The tests below splice one component into it and derive the ids by hand.

func charsTokenizer(t *testing.T, members map[string]string) *Tokenizer {
	t.Helper()
	data, err := os.ReadFile("testdata/chars.json")
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	for k, v := range members {
		top[k] = json.RawMessage(v)
	}
	data, err = json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse with %v: %v", members, err)
	}
	return tok
}

type encodeCase struct {
	name      string
	component string // JSON of the spliced component
	in        string
	want      []int32
}

func runEncodeCases(t *testing.T, member string, cases []encodeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := charsTokenizer(t, map[string]string{member: c.component})
			if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
				t.Errorf("Encode(%#q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

func TestBaseMerges(t *testing.T) {
	tok := charsTokenizer(t, nil)
	cases := []struct {
		in   string
		want []int32
	}{
		// (a,a) rank 5 at 0 and (a,b) rank 3 at 1: the lower rank wins → a, ab.
		{"aab", []int32{65, 99}},
		// (a,a) at 0 and at 1 tie on rank: the leftmost merges first → aa, a.
		{"aaa", []int32{101, 65}},
		// (a,-) rank 0 beats (-,b) rank 1 → a-, b.
		{"a-b", []int32{96, 66}},
		// Characters outside the vocab vanish without unk or byte fallback.
		{"aé", []int32{65}},
		{"", []int32{}},
		// No pre-tokenizer: the spaces stay inside the one word.
		{"a  b", []int32{65, 0, 0, 66}},
	}
	for _, c := range cases {
		if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%#q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestNormalizers(t *testing.T) {
	runEncodeCases(t, "normalizer", []encodeCase{
		// "b▁a": (▁,a) rank 2 beats (b,▁) rank 4 → b, ▁a.
		{"replace string", `{"type":"Replace","pattern":{"String":" "},"content":"▁"}`, "b a", []int32{66, 98}},
		// Oniguruma's \s is Unicode: U+3000 is whitespace → "a▁b", no merge applies.
		{"replace regex unicode space", `{"type":"Replace","pattern":{"Regex":"\\s+"},"content":"▁"}`, "a \u3000\tb", []int32{65, 95, 66}},
		// "▁ab": (▁,a) rank 2 beats (a,b) rank 3 → ▁a, b.
		{"prepend", `{"type":"Prepend","prepend":"▁"}`, "ab", []int32{98, 66}},
		{"prepend empty input", `{"type":"Prepend","prepend":"▁"}`, "", []int32{}},
		// "a"+U+0301 composes to "á", which is not in the vocab → nothing.
		{"nfc", `{"type":"NFC"}`, "a\u0301", []int32{}},
		// "á" decomposes to "a"+U+0301; the mark is not in the vocab → a.
		{"nfd", `{"type":"NFD"}`, "\u00e1", []int32{65}},
		// Fullwidth ａｂ folds to "ab" → merge rank 3.
		{"nfkc", `{"type":"NFKC"}`, "\uff41\uff42", []int32{99}},
		// The ﬁ ligature decomposes to "fi" → f=70, i=73.
		{"nfkd", `{"type":"NFKD"}`, "\ufb01", []int32{70, 73}},
		{"lowercase", `{"type":"Lowercase"}`, "AB", []int32{99}},
		// U+0130 lowercases to "i" + U+0307 (Rust's full mapping); the mark is dropped.
		{"lowercase dotted I", `{"type":"Lowercase"}`, "\u0130", []int32{73}},
		{"strip both", `{"type":"Strip","strip_left":true,"strip_right":true}`, "  ab \t", []int32{99}},
		{"strip left", `{"type":"Strip","strip_left":true,"strip_right":false}`, "  ab ", []int32{99, 0}},
		{"strip right", `{"type":"Strip","strip_left":false,"strip_right":true}`, " ab  ", []int32{0, 99}},
		// Lowercase then Replace: "B A" → "b a" → "b▁a" → b, ▁a.
		{"sequence", `{"type":"Sequence","normalizers":[{"type":"Lowercase"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]}`, "B A", []int32{66, 98}},
		// ByteLevel maps ' ' to 'Ġ' (102); ASCII letters map to themselves.
		{"bytelevel", `{"type":"ByteLevel"}`, "a b", []int32{65, 102, 66}},
	})
}

func TestPreTokenizers(t *testing.T) {
	split := func(pat, behavior string, invert bool) string {
		inv := "false"
		if invert {
			inv = "true"
		}
		return `{"type":"Split","pattern":` + pat + `,"behavior":"` + behavior + `","invert":` + inv + `}`
	}
	dash := `{"String":"-"}`
	runEncodeCases(t, "pre_tokenizer", []encodeCase{
		// Without a pre-tokenizer "a-b" is a-, b (see TestBaseMerges).
		{"split removed", split(dash, "Removed", false), "a-b", []int32{65, 66}},
		{"split isolated", split(dash, "Isolated", false), "a-b", []int32{65, 13, 66}},
		// "x-", "b": (x,-) has no merge; unsplit "x-b" would give x, -b.
		{"split merged with previous", split(dash, "MergedWithPrevious", false), "x-b", []int32{88, 13, 66}},
		// "a", "-b": the delimiter joins the next piece, so -b merges.
		{"split merged with next", split(dash, "MergedWithNext", false), "a-b", []int32{65, 97}},
		// "a", "--", "b": unsplit "a--b" would be a-, -b.
		{"split contiguous", split(dash, "Contiguous", false), "a--b", []int32{65, 13, 13, 66}},
		// Inverted \w+ with Removed keeps the words and drops what lies between them.
		{"split regex inverted", split(`{"Regex":"\\w+"}`, "Removed", true), "ab cd", []int32{99, 67, 68}},
		// Lookahead needs the backtracking engine: "ab", " ", " cd" (the run of two
		// spaces leaves its last one to the word).
		{"split regex lookahead", split(`{"Regex":" ?[a-z]+|\\s+(?!\\S)|\\s+"}`, "Isolated", false), "ab  cd", []int32{99, 0, 0, 67, 68}},
		// "▁b▁x" split before each ▁: "▁b", "▁x".
		{"metaspace split", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`, "b x", []int32{95, 66, 95, 88}},
		// Unsplit "▁b▁x": (b,▁) rank 4 is the only merge → ▁, b▁, x.
		{"metaspace no split", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":false}`, "b x", []int32{95, 100, 88}},
		{"metaspace never", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":true}`, "a", []int32{65}},
		{"metaspace legacy add_prefix_space false", `{"type":"Metaspace","replacement":"▁","add_prefix_space":false}`, "a", []int32{65}},
		{"metaspace first", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`, "a", []int32{98}},
		// GPT-2 regex: "ab", "'s"; ASCII maps to itself.
		{"bytelevel", `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`, "ab's", []int32{99, 7, 83}},
		// " ab" → "Ġab" → Ġ, ab.
		{"bytelevel prefix space", `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`, "ab", []int32{102, 99}},
		// "a", " ", " b": of two spaces the last goes with the word.
		{"bytelevel space run", `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`, "a  b", []int32{65, 102, 102, 66}},
		// use_regex false: one piece "aĠb", no merges apply.
		{"bytelevel no regex", `{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}`, "a b", []int32{65, 102, 66}},
		// \w+|[^\w\s]+: "a", "-", "b", "c".
		{"whitespace", `{"type":"Whitespace"}`, "a-b c", []int32{65, 13, 66, 67}},
		// Split on whitespace only: "a-b" keeps its merge.
		{"whitespace split", `{"type":"WhitespaceSplit"}`, "a-b c", []int32{96, 66, 67}},
		{"digits individual", `{"type":"Digits","individual_digits":true}`, "a123", []int32{65, 17, 18, 19}},
		// "a", "123": 1 2 merges → 12, 3.
		{"digits contiguous", `{"type":"Digits","individual_digits":false}`, "a123", []int32{65, 103, 19}},
		{"sequence", `{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},` + split(dash, "Isolated", false) + `]}`, "a-b c", []int32{65, 13, 66, 67}},
	})
}

func TestMetaspaceFirstAfterSpecialToken(t *testing.T) {
	added := `[{"id":200,"content":"<x>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}]`
	for _, c := range []struct {
		scheme string
		want   []int32
	}{
		// "a" at the start gets ▁ (→ ▁a); the "a" after <x> only under "always".
		{"first", []int32{98, 200, 65}},
		{"always", []int32{98, 200, 98}},
	} {
		tok := charsTokenizer(t, map[string]string{
			"added_tokens":  added,
			"pre_tokenizer": `{"type":"Metaspace","replacement":"▁","prepend_scheme":"` + c.scheme + `","split":true}`,
		})
		if got := tok.Encode("a<x>a"); !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%#q) = %v, want %v", c.scheme, "a<x>a", got, c.want)
		}
	}
}

func TestDecoders(t *testing.T) {
	cases := []struct {
		name    string
		decoder string
		ids     []int32
		want    string
	}{
		{"none joins with spaces", `null`, []int32{99, 66}, "ab b"},
		{"fuse", `{"type":"Fuse"}`, []int32{99, 66}, "abb"},
		// "▁a","▁","b" → " a"," ","b".
		{"replace", `{"type":"Replace","pattern":{"String":"▁"},"content":" "}`, []int32{98, 95, 66}, " a b"},
		{"replace regex", `{"type":"Replace","pattern":{"Regex":"[ab]+"},"content":"X"}`, []int32{99, 67}, "Xc"},
		{"byte fallback", `{"type":"ByteFallback"}`, []int32{104}, "A"},
		// E2 82 AC is "€".
		{"byte fallback multibyte", `{"type":"ByteFallback"}`, []int32{65, 105, 106, 107, 66}, "a€b"},
		// A lone E2 is not UTF-8: one U+FFFD per byte token.
		{"byte fallback invalid", `{"type":"ByteFallback"}`, []int32{105, 106, 65}, "\uFFFD\uFFFDa"},
		// Fused "  a " loses one leading and one trailing space.
		{"strip", `{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":1}]}`, []int32{0, 0, 65, 0}, " a"},
		// Strip per token before fusing: " " → "" each.
		{"strip per token", `{"type":"Strip","content":" ","start":1,"stop":0}`, []int32{0, 65, 0}, "a"},
		// First token: ▁ dropped; later ones: ▁ → space.
		{"metaspace", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`, []int32{98, 95, 66}, "a b"},
		{"metaspace never", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":true}`, []int32{98, 95, 66}, " a b"},
		// Ġ is byte 0x20; "▁" is outside the alphabet and passes through as its own bytes.
		{"bytelevel", `{"type":"ByteLevel"}`, []int32{102, 99, 95}, " ab▁"},
		// The suffix "b" becomes a space, and nothing in the last token.
		{"bpe decoder", `{"type":"BPEDecoder","suffix":"b"}`, []int32{65, 66, 65, 66}, "a a"},
		{"gemma sequence", `{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]}`, []int32{98, 105, 106, 107}, " a€"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := charsTokenizer(t, map[string]string{"decoder": c.decoder})
			if got := tok.Decode(c.ids, false); got != c.want {
				t.Errorf("Decode(%v) = %#q, want %#q", c.ids, got, c.want)
			}
		})
	}
}

func TestAddedTokens(t *testing.T) {
	tokJSON := func(content string, id int, props string) string {
		return `{"id":` + itoa(id) + `,"content":"` + content + `",` + props + `}`
	}
	plain := `"single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true`
	cases := []struct {
		name  string
		added string
		norm  string
		in    string
		want  []int32
	}{
		{"special inside a word", tokJSON("<x>", 200, plain), "null", "a<x>b", []int32{65, 200, 66}},
		// Without the token, the characters: '<'=28 'x'=88 '>'=30.
		{"no added tokens", "", "null", "a<x>b", []int32{65, 28, 88, 30, 66}},
		// Leftmost-longest: "<x>>" beats "<x>".
		{"longest match", tokJSON("<x>", 200, plain) + "," + tokJSON("<x>>", 201, plain), "null", "<x>>b", []int32{201, 66}},
		{"single word alone", tokJSON("zz", 202, `"single_word":true,"lstrip":false,"rstrip":false,"normalized":false,"special":false`), "null", "zz y", []int32{202, 0, 89}},
		// Preceded by the word character 'a': not a match → a, z, z.
		{"single word inside word", tokJSON("zz", 202, `"single_word":true,"lstrip":false,"rstrip":false,"normalized":false,"special":false`), "null", "azz", []int32{65, 90, 90}},
		{"lstrip", tokJSON("<x>", 200, `"single_word":false,"lstrip":true,"rstrip":false,"normalized":false,"special":true`), "null", "a  <x>b", []int32{65, 200, 66}},
		{"no lstrip", tokJSON("<x>", 200, plain), "null", "a  <x>b", []int32{65, 0, 0, 200, 66}},
		{"rstrip", tokJSON("<x>", 200, `"single_word":false,"lstrip":false,"rstrip":true,"normalized":false,"special":true`), "null", "a<x> \tb", []int32{65, 200, 66}},
		// A normalized token matches after the normalizer: "<X>" lowercases to "<x>", and so
		// does the input.
		{"normalized", tokJSON("<X>", 203, `"single_word":false,"lstrip":false,"rstrip":false,"normalized":true,"special":false`), `{"type":"Lowercase"}`, "a<X>b", []int32{65, 203, 66}},
		// Not normalized: "<X>" is matched in the raw text only, so "<x>" stays characters.
		{"not normalized", tokJSON("<X>", 203, plain), `{"type":"Lowercase"}`, "a<x>b", []int32{65, 28, 88, 30, 66}},
		// A content already in the model vocab keeps its vocab id (99), not the declared one.
		{"vocab id wins", tokJSON("ab", 250, plain), "null", "xab", []int32{88, 99}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := charsTokenizer(t, map[string]string{"added_tokens": "[" + c.added + "]", "normalizer": c.norm})
			if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
				t.Errorf("Encode(%#q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

func TestAddedTokenNeverSplitByPreTokenizer(t *testing.T) {
	tok := charsTokenizer(t, map[string]string{
		"added_tokens":  `[{"id":200,"content":"<a b>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}]`,
		"pre_tokenizer": `{"type":"WhitespaceSplit"}`,
		"decoder":       `{"type":"Fuse"}`,
	})
	// "x", "<a b>" (whole, despite the space inside), "b".
	want := []int32{88, 200, 66}
	if got := tok.Encode("x<a b>b"); !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if got := tok.Decode(want, true); got != "xb" {
		t.Errorf("Decode(skip special) = %#q, want %#q", got, "xb")
	}
	if got := tok.Decode(want, false); got != "x<a b>b" {
		t.Errorf("Decode = %#q, want %#q", got, "x<a b>b")
	}
	if !tok.IsSpecial(200) || tok.IsSpecial(88) {
		t.Errorf("IsSpecial(200), IsSpecial(88) = %v, %v, want true, false", tok.IsSpecial(200), tok.IsSpecial(88))
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
