package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/internal/atomicfile"
	"github.com/dgtune/dgtune/internal/cli"
)

// toyTasks are the demo's string transformations; each maps a word to its answer.
var toyTasks = map[string]func(string, string) string{
	"copy": func(w, _ string) string { return w },
	"reverse": func(w, _ string) string {
		r := []rune(w)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r)
	},
	// shift replaces every letter by the next one of the alphabet (wrapping around).
	"shift": func(w, alphabet string) string {
		var b strings.Builder
		for _, c := range w {
			i := strings.IndexRune(alphabet, c)
			b.WriteByte(alphabet[(i+1)%len(alphabet)])
		}
		return b.String()
	},
}

// checkAlphabet refuses an alphabet the tasks cannot use: shift moves by one byte and looks
// a letter up by its first place, so letters must be single bytes and distinct.
func checkAlphabet(a string) error {
	for i := 0; i < len(a); i++ {
		if a[i] >= 0x80 {
			return fmt.Errorf("--alphabet %q: letters must be ASCII", a)
		}
		if strings.IndexByte(a[:i], a[i]) >= 0 {
			return fmt.Errorf("--alphabet %q repeats %q", a, a[i])
		}
	}
	return nil
}

// distinctWords counts the words of length minLen..maxLen over k letters, saturating at
// the largest uint64.
func distinctWords(k, minLen, maxLen int) uint64 {
	var total uint64
	for n := minLen; n <= maxLen; n++ {
		c := uint64(1)
		for range n {
			if hi, lo := bits.Mul64(c, uint64(k)); hi != 0 {
				return math.MaxUint64
			} else {
				c = lo
			}
		}
		if total+c < total {
			return math.MaxUint64
		}
		total += c
	}
	return total
}

func mkdataCommand() *cobra.Command {
	var task, alphabet, out string
	var seed uint64
	var train, valid, test, minLen, maxLen int
	cmd := &cobra.Command{
		Use:   "mkdata --task copy|shift|reverse --seed N --out DIR",
		Short: "Write a toy prompt/completion data set (the embedded demo's corpus)",
		Long: "Write train/valid/test.jsonl rows {\"prompt\": \"<task>: <word>\", \"completion\": <answer>} with random words\n" +
			"over --alphabet. The same flags and seed always give the same files.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fn, ok := toyTasks[task]
			if !ok {
				return fmt.Errorf("--task %q: want copy, shift or reverse", task)
			}
			if out == "" || alphabet == "" || minLen < 1 || maxLen < minLen {
				return fmt.Errorf("need --out, a non-empty --alphabet and 1 ≤ --min-len ≤ --max-len")
			}
			if train < 0 || valid < 0 || test < 0 {
				return fmt.Errorf("--train %d, --valid %d, --test %d: counts must not be negative", train, valid, test)
			}
			if err := checkAlphabet(alphabet); err != nil {
				return err
			}
			// Words are distinct across the three splits, so there must be enough of them;
			// drawing more than exist would never end.
			want := train + valid + test
			if have := distinctWords(len(alphabet), minLen, maxLen); uint64(want) > have {
				return fmt.Errorf("--train %d + --valid %d + --test %d ask for %d distinct words, but --alphabet %q has only %d of length %d to %d: use more letters, longer words or fewer examples",
					train, valid, test, want, alphabet, have, minLen, maxLen)
			}
			ctx := cmd.Context()
			rng := rand.New(rand.NewPCG(seed, 0xda7a))
			seen := map[string]bool{}
			word := func() string {
				for {
					n := minLen + rng.IntN(maxLen-minLen+1)
					b := make([]byte, n)
					for i := range b {
						b[i] = alphabet[rng.IntN(len(alphabet))]
					}
					if !seen[string(b)] || len(seen) > 1000000 {
						seen[string(b)] = true
						return string(b)
					}
				}
			}
			// Every file is made in memory first and written only once all are: an
			// interrupted run writes none of them.
			files := map[string][]byte{}
			for _, sp := range []struct {
				name string
				n    int
			}{{"train", train}, {"valid", valid}, {"test", test}} {
				var sb strings.Builder
				for range sp.n {
					if ctx.Err() != nil {
						return cli.Interrupted(ctx)
					}
					w := word()
					row, _ := json.Marshal(map[string]string{"prompt": task + ": " + w, "completion": fn(w, alphabet)})
					sb.Write(row)
					sb.WriteByte('\n')
				}
				files[sp.name+".jsonl"] = []byte(sb.String())
			}
			if ctx.Err() != nil {
				return cli.Interrupted(ctx)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			for _, name := range []string{"train.jsonl", "valid.jsonl", "test.jsonl"} {
				if err := atomicfile.WriteFile(filepath.Join(out, name), files[name]); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d/%d/%d %s examples\n", out, train, valid, test, task)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&task, "task", "copy", "copy, shift (next letter) or reverse")
	f.StringVar(&alphabet, "alphabet", "abcdefgh", "letters words are made of")
	f.IntVar(&minLen, "min-len", 4, "shortest word")
	f.IntVar(&maxLen, "max-len", 4, "longest word")
	f.IntVar(&train, "train", 2000, "train examples")
	f.IntVar(&valid, "valid", 64, "valid examples")
	f.IntVar(&test, "test", 64, "test examples")
	f.Uint64Var(&seed, "seed", 0, "seed")
	f.StringVar(&out, "out", "", "output directory")
	return cmd
}
