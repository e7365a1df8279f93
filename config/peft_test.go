package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func trainFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
	BindFlagsFor(fs, CommandTrain)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestPEFTNames: PEFT's r, lora_alpha, target_modules and lora_dropout are read as
// dgtune's keys, in a file (top level or inside lora_parameters) and as flags, with one
// note saying how.
func TestPEFTNames(t *testing.T) {
	q, v := "self_attn.q_proj", "self_attn.v_proj"
	cases := []struct {
		name    string
		yaml    string
		flags   []string
		rank    int
		scale   float64
		dropout float64
		keys    []string
		note    string // FILE stands for the file's path
	}{
		{"file, top level", "r: 16\nlora_alpha: 32\ntarget_modules: [q_proj, v_proj]\nlora_dropout: 0.05\n", nil, 16, 2, 0.05, []string{q, v},
			"PEFT names read as dgtune's: FILE: r 16 → lora_parameters.rank 16; FILE: lora_alpha 32 → lora_parameters.scale 2 (lora_alpha / rank 16); " +
				"FILE: target_modules [q_proj, v_proj] → lora_parameters.keys [self_attn.q_proj, self_attn.v_proj]; FILE: lora_dropout 0.05 → lora_parameters.dropout 0.05"},
		{"file, inside lora_parameters", "lora_parameters:\n  r: 4\n  lora_alpha: 8\n", nil, 4, 2, 0, nil,
			"PEFT names read as dgtune's: FILE: r 4 → lora_parameters.rank 4; FILE: lora_alpha 8 → lora_parameters.scale 2 (lora_alpha / rank 4)"},
		{"lora_alpha alone divides by the default rank", "lora_alpha: 16\n", nil, 8, 2, 0, nil,
			"PEFT names read as dgtune's: FILE: lora_alpha 16 → lora_parameters.scale 2 (lora_alpha / rank 8)"},
		{"alpha over the rank of a flag", "r: 16\nlora_alpha: 32\n", []string{"--lora-parameters.rank", "8"}, 8, 4, 0, nil,
			"PEFT names read as dgtune's: FILE: r 16 not used: --lora-parameters.rank sets lora_parameters.rank 8; FILE: lora_alpha 32 → lora_parameters.scale 4 (lora_alpha / rank 8)"},
		{"a scale flag wins over the file's alpha", "lora_alpha: 32\n", []string{"--lora-parameters.scale", "3"}, 8, 3, 0, nil,
			"PEFT names read as dgtune's: FILE: lora_alpha 32 not used: --lora-parameters.scale sets lora_parameters.scale 3"},
		{"the same value twice is fine", "r: 8\nlora_parameters:\n  rank: 8\n", nil, 8, 8, 0, nil,
			"PEFT names read as dgtune's: FILE: r 8 → lora_parameters.rank 8"},
		{"flags", "", []string{"--r", "4", "--lora-alpha", "8", "--target-modules", "o_proj,down_proj", "--lora-dropout", "0.1"}, 4, 2, 0.1, []string{"self_attn.o_proj", "mlp.down_proj"},
			"PEFT names read as dgtune's: --r 4 → lora_parameters.rank 4; --lora-alpha 8 → lora_parameters.scale 2 (lora_alpha / rank 4); " +
				"--target-modules [o_proj, down_proj] → lora_parameters.keys [self_attn.o_proj, mlp.down_proj]; --lora-dropout 0.1 → lora_parameters.dropout 0.1"},
		{"all-linear", "target_modules: all-linear\n", nil, 8, 8, 0,
			[]string{q, "self_attn.k_proj", v, "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "router.proj"},
			"PEFT names read as dgtune's: FILE: target_modules all-linear → lora_parameters.keys [self_attn.q_proj, self_attn.k_proj, self_attn.v_proj, self_attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj, router.proj]"},
		{"no alias, no note", "lora_parameters:\n  rank: 4\n", nil, 4, 8, 0, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = writeYAML(t, tc.yaml)
			}
			c, err := Load(path, trainFlags(t, tc.flags...))
			if err != nil {
				t.Fatal(err)
			}
			p := c.LoRAParameters
			if p.Rank != tc.rank || p.Scale != tc.scale || p.Dropout != tc.dropout {
				t.Errorf("rank %d scale %g dropout %g, want %d %g %g", p.Rank, p.Scale, p.Dropout, tc.rank, tc.scale, tc.dropout)
			}
			if tc.keys != nil && !slices.Equal(p.Keys, tc.keys) {
				t.Errorf("keys %v, want %v", p.Keys, tc.keys)
			}
			want := strings.ReplaceAll(tc.note, "FILE", path)
			var got []string
			for _, n := range c.Notes {
				if strings.HasPrefix(n, "PEFT names") {
					got = append(got, n)
				}
			}
			switch {
			case want == "" && len(got) > 0:
				t.Errorf("notes %q, want none", got)
			case want != "" && (len(got) != 1 || got[0] != want):
				t.Errorf("notes %q\nwant %q", got, want)
			}
		})
	}
}

// TestPEFTNameConflicts: an alias and its key given in the same place must agree.
func TestPEFTNameConflicts(t *testing.T) {
	cases := []struct {
		yaml  string
		flags []string
		want  string // FILE stands for the file's path
	}{
		{"r: 16\nlora_parameters:\n  rank: 8\n", nil, "config: FILE: r 16 and lora_parameters.rank 8 disagree; keep one"},
		{"lora_dropout: 0.1\nlora_parameters:\n  dropout: 0.2\n", nil, "config: FILE: lora_dropout 0.1 and lora_parameters.dropout 0.2 disagree; keep one"},
		{"target_modules: [q_proj]\nlora_parameters:\n  keys: [self_attn.v_proj]\n", nil, "config: FILE: target_modules [q_proj] and lora_parameters.keys [self_attn.v_proj] disagree; keep one"},
		{"r: 4\nlora_parameters:\n  r: 8\n", nil, "config: FILE: r (4) and lora_parameters.r (8) disagree; keep one"},
		{"lora_alpha: 32\nlora_parameters:\n  rank: 16\n  scale: 8\n", nil, "config: FILE: lora_alpha 32 (scale 2 at rank 16) and FILE: lora_parameters.scale 8 disagree; keep one"},
		{"", []string{"--r", "4", "--lora-parameters.rank", "8"}, "config: --r 4 and --lora-parameters.rank 8 disagree; keep one"},
		{"", []string{"--lora-alpha", "8", "--lora-parameters.scale", "2"}, "config: --lora-alpha 8 (scale 1 at rank 8) and --lora-parameters.scale 2 disagree; keep one"},
		{"target_modules: [qq_proj]\n", nil, `config: FILE: target_modules [qq_proj]: "qq_proj" names no linear of a DiffusionGemma layer (want some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, router.proj, or all-linear)`},
		{"target_modules: \".*proj\"\n", nil, "config: FILE: target_modules .*proj: a regex is not read here; list the modules (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, router.proj) or write all-linear"},
	}
	for _, tc := range cases {
		path := ""
		if tc.yaml != "" {
			path = writeYAML(t, tc.yaml)
		}
		_, err := Load(path, trainFlags(t, tc.flags...))
		want := strings.ReplaceAll(tc.want, "FILE", path)
		if err == nil || err.Error() != want {
			t.Errorf("Load(%q, %q) error = %v\nwant %s", tc.yaml, tc.flags, err, want)
		}
	}
}
