package tokenizer

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSyntheticLayout(t *testing.T) {
	for _, v := range []int{SyntheticMinVocab, 512, 4096, 8192} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			data, err := NewSynthetic(v, SyntheticCorpus())
			if err != nil {
				t.Fatal(err)
			}
			tok, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.VocabSize(); got != v {
				t.Errorf("VocabSize() = %d, want %d", got, v)
			}
			want := map[string]int32{
				"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4, "<|tool_response>": 50,
				"<|channel>": 100, "<channel|>": 101, "<|turn>": 105, "<turn|>": 106, "\n": 107,
				"<0x00>": 108, "<0xFF>": 363, "▁": 364, "<unused0>": 5, "<unused44>": 49, "<unused45>": 51,
				"<|image>": int32(v - 3), "<|image|>": int32(v - 2), "<image|>": int32(v - 1),
			}
			for s, id := range want {
				if got, ok := tok.TokenID(s); !ok || got != id {
					t.Errorf("TokenID(%q) = %d, %v, want %d", s, got, ok, id)
				}
			}
			for _, id := range []int32{0, 2, 5, 106, int32(v - 2)} {
				if !tok.IsSpecial(id) {
					t.Errorf("id %d is not special", id)
				}
			}
			for _, id := range []int32{107, 108, 364} {
				if tok.IsSpecial(id) {
					t.Errorf("id %d is special", id)
				}
			}
			boi, img, eoi := SyntheticImageIDs(v)
			if boi != int32(v-3) || img != int32(v-2) || eoi != int32(v-1) {
				t.Errorf("SyntheticImageIDs(%d) = %d, %d, %d", v, boi, img, eoi)
			}
		})
	}
}

func TestSyntheticDeterministic(t *testing.T) {
	a, err := NewSynthetic(2048, SyntheticCorpus())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSynthetic(2048, SyntheticCorpus())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two NewSynthetic calls with the same inputs differ")
	}
}

func TestSyntheticTooSmall(t *testing.T) {
	_, err := NewSynthetic(SyntheticMinVocab-1, nil)
	if err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("NewSynthetic(%d) error = %v, want one naming the minimum", SyntheticMinVocab-1, err)
	}
}

// A corpus small enough to train by hand. "ab ab ab cd" normalizes to "ab▁ab▁ab▁cd", whose
// words are ab ×1, ▁ab ×2, ▁cd ×1. Alphabet after the fixed ▁ (364), by count then code
// point: a(3) 365, b(3) 366, c(1) 367, d(1) 368. Pair counts: (a,b) 3, (▁,a) 2, (▁,c) 1,
// (c,d) 1 → merge a b = ab 369. Then (▁,ab) 2 → ▁ab 370. Then (▁,c) and (c,d) tie at 1;
// "c" sorts before "▁" (0x63 < 0xE2) → cd 371. Then (▁,cd) → ▁cd 372. No pairs remain:
// 373..376 are <unused97>..<unused100> (ids 0..106 hold 10 specials and 97 reserved) and 377..379 the image tokens.
func TestSyntheticTraining(t *testing.T) {
	data, err := NewSynthetic(380, []string{"ab ab ab cd"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for s, id := range map[string]int32{"a": 365, "b": 366, "c": 367, "d": 368, "ab": 369, "▁ab": 370, "cd": 371, "▁cd": 372, "<unused97>": 373, "<unused100>": 376} {
		if got, ok := tok.TokenID(s); !ok || got != id {
			t.Errorf("TokenID(%q) = %d, %v, want %d", s, got, ok, id)
		}
	}
	cases := []struct {
		in   string
		want []int32
	}{
		{"ab ab cd", []int32{369, 370, 372}},
		// "e" is not in the alphabet: byte fallback, <0x65> = 108+0x65 = 209.
		{"abe", []int32{369, 209}},
		// "e" + U+0301 (CC 81): 209, 108+0xCC = 312, 108+0x81 = 237.
		{"e\u0301", []int32{209, 312, 237}},
		// "中" is E4 B8 AD.
		{"中", []int32{336, 292, 281}},
		// "😀" is F0 9F 98 80.
		{"😀", []int32{348, 267, 260, 236}},
		// Specials never split, "\n" is 107.
		{"<bos><|turn>ab\n", []int32{2, 105, 369, 107}},
	}
	for _, c := range cases {
		if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%#q) = %v, want %v", c.in, got, c.want)
		}
		if got, ok := roundTrips(tok, c.in); !ok {
			t.Errorf("Decode(Encode(%#q)) = %#q", c.in, got)
		}
	}
}

func TestSyntheticByteOnly(t *testing.T) {
	// No corpus: every character is bytes, except the always-present ▁ and \n.
	data, err := NewSynthetic(512, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// "a b" → "a▁b": <0x61> = 108+0x61 = 205, ▁ = 364, <0x62> = 206.
	if got, want := tok.Encode("a b"), []int32{205, 364, 206}; !slices.Equal(got, want) {
		t.Errorf("Encode(a b) = %v, want %v", got, want)
	}
}
