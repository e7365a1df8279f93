package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/tokenizer"
)

// demoBase is the committed demo checkpoint (its real Gemma tokenizer).
const demoBase = "../demo/base"

// eos_fill fills with the tokenizer's EOS: tokenizer_config.json's eos_token (a string or an
// AddedToken object) where the checkpoint has one, else <eos>; a name the tokenizer lacks, or
// a file that does not parse, is refused in one line.
func TestFillTokenFromTokenizerConfig(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join(demoBase, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := dg.LoadConfig(demoBase)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file    string // "" = no tokenizer_config.json
		want    int32
		wantErr string
	}{
		{"", 1, ""},
		{`{"eos_token": "<turn|>"}`, 106, ""},
		{`{"eos_token": {"content": "<eos>", "special": true}}`, 1, ""},
		{`{"bos_token": "<bos>"}`, 1, ""},
		{`{"eos_token": "<|endoftext|>"}`, 0, `eos_fill: tokenizer_config.json names eos_token "<|endoftext|>", which tokenizer.json does not have`},
		{`{"eos_token": 7}`, 0, "eos_token: want a string or"},
		{`{"eos_token": `, 0, "tokenizer_config.json: unexpected end of JSON input"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if c.file != "" {
			if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := fillToken(dir, tok, mc)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("fillToken(%s) error = %v, want %q", c.file, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("fillToken(%s) = %d, %v, want %d", c.file, got, err, c.want)
		}
	}
}
