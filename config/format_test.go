package config

import (
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	d := Defaults()
	if got := FormatChanged(d); got != "" {
		t.Errorf("FormatChanged(Defaults()) = %q, want \"\"", got)
	}
	all := Format(d)
	for _, want := range []string{"optimizer: adamw\n", "lora_parameters:\n    dropout: 0\n", "\n    rank: 8\n"} {
		if !strings.Contains(all, want) {
			t.Errorf("Format(Defaults()) lacks %q:\n%s", want, all)
		}
	}
	c := d
	c.LoRAParameters.Rank = 4
	c.Iters = 12
	c.Presets = map[string]string{"iters": "recipe nemo"}
	want := "iters: 12 # recipe nemo\nlora_parameters:\n    rank: 4\n"
	if got := FormatChanged(c); got != want {
		t.Errorf("FormatChanged = %q, want %q", got, want)
	}
}

func TestNested(t *testing.T) {
	c := Defaults()
	c.LoRAParameters.Rank = 4
	n := Nested(c)
	lp, ok := n["lora_parameters"].(map[string]any)
	if !ok || lp["rank"] != 4 || n["optimizer"] != "adamw" {
		t.Errorf("Nested: lora_parameters %v, optimizer %v", n["lora_parameters"], n["optimizer"])
	}
	if len(n) >= len(Keys()) {
		t.Errorf("Nested has %d top-level keys for %d settings: nothing was nested", len(n), len(Keys()))
	}
}
