package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/tokenizer"
)

func tokenizeCommand() *cobra.Command {
	var modelDir, text, ids string
	var skipSpecial bool
	cmd := &cobra.Command{
		Use:   "tokenize --model DIR (--text STR | --ids 1,2,3)",
		Short: "Encode text to ids (plain: no template, no BOS) or decode ids to text",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := tokenizer.Load(filepath.Join(modelDir, "tokenizer.json"))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case cmd.Flags().Changed("ids"):
				list, err := parseIDs("--ids", ids)
				if err != nil {
					return err
				}
				for _, id := range list {
					if id < 0 || int(id) >= tok.VocabSize() {
						return fmt.Errorf("--ids: id %d out of range [0, %d)", id, tok.VocabSize())
					}
				}
				fmt.Fprintln(w, tok.Decode(list, skipSpecial))
			case cmd.Flags().Changed("text"):
				return printJSON(w, nonNil(tok.Encode(text)))
			default:
				return fmt.Errorf("give --text or --ids")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "directory holding tokenizer.json")
	cmd.Flags().StringVar(&text, "text", "", "text to encode")
	cmd.Flags().StringVar(&ids, "ids", "", "comma-separated ids to decode")
	cmd.Flags().BoolVar(&skipSpecial, "skip-special", false, "drop special tokens when decoding")
	return cmd
}

func templateCommand() *cobra.Command {
	var modelDir, messages string
	var genPrompt bool
	cmd := &cobra.Command{
		Use:   "template --model DIR --messages FILE.json [--generation-prompt]",
		Short: "Render a conversation with the DiffusionGemma chat template and print the ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tok, err := tokenizer.Load(filepath.Join(modelDir, "tokenizer.json"))
			if err != nil {
				return err
			}
			b, err := os.ReadFile(messages)
			if err != nil {
				return fmt.Errorf("--messages: %w", err)
			}
			var msgs []chat.Message
			if err := json.Unmarshal(b, &msgs); err != nil {
				return fmt.Errorf("--messages %s: want a JSON array of {role, content}: %w", messages, err)
			}
			ids, err := chat.EncodePrompt(tok, msgs, genPrompt)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), nonNil(ids))
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "directory holding tokenizer.json")
	cmd.Flags().StringVar(&messages, "messages", "", "JSON file with [{\"role\", \"content\"}, ...]")
	cmd.Flags().BoolVar(&genPrompt, "generation-prompt", false, "end with the model turn's generation prompt")
	return cmd
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func printJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
