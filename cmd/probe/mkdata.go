package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
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
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
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
			for _, sp := range []struct {
				name string
				n    int
			}{{"train", train}, {"valid", valid}, {"test", test}} {
				var sb strings.Builder
				for range sp.n {
					w := word()
					row, _ := json.Marshal(map[string]string{"prompt": task + ": " + w, "completion": fn(w, alphabet)})
					sb.Write(row)
					sb.WriteByte('\n')
				}
				if err := os.WriteFile(filepath.Join(out, sp.name+".jsonl"), []byte(sb.String()), 0o644); err != nil {
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
