package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgtune/dgtune/config"
	"github.com/dgtune/dgtune/data"
	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/imageproc"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/tokenizer"
)

// NewEncoder returns the function that turns an example into (prompt, target) ids:
// the chat template with the generation prompt for the prompt, the bare completion
// (truncated to max_canvas) for the target, optionally followed by <turn|> and EOS
// filling the canvas (eos_fill). With long_targets random_block the completion is kept
// whole (the objective trains one max_canvas block of it at a time) and eos_fill always
// appends <turn|>, then fills with EOS to a whole number of canvases, as NeMo AutoModel
// fills the response's last canvas. Each <|image|> of the prompt is expanded into the
// image block of the example's matching image; max_prompt may not cut into an image.
func NewEncoder(c config.Config, tok *tokenizer.Tokenizer, mc *dg.Config) (data.Encoder, error) {
	return newEncoder(c, tok, mc, nil)
}

// newEncoder is NewEncoder; measure, when not nil, is told each example's prompt and
// completion lengths before max_prompt and max_canvas cut them (the data check).
func newEncoder(c config.Config, tok *tokenizer.Tokenizer, mc *dg.Config, measure func(index, prompt, completion int)) (data.Encoder, error) {
	nemo := c.ChatTemplate == config.ChatTemplateNeMo
	var turnEnd, eos int32 = -1, -1
	if c.EOSFill {
		var ok bool
		if turnEnd, ok = tok.TokenID("<turn|>"); !ok {
			return nil, fmt.Errorf("eos_fill: tokenizer has no <turn|> token")
		}
		var err error
		if eos, err = fillToken(c.Model, tok, mc); err != nil {
			return nil, err
		}
	}
	return func(ex data.Example) ([]int32, []int32, error) {
		msgs := ex.Prompt
		if len(msgs) == 0 {
			msgs = []chat.Message{{Role: "user", Content: ""}}
		}
		var prompt []int32
		var err error
		if nemo {
			prompt, err = chat.EncodePromptNeMo(tok, msgs)
		} else {
			prompt, err = chat.EncodePrompt(tok, msgs, true)
		}
		if err != nil {
			return nil, nil, err
		}
		if prompt, err = expandImages(prompt, ex.Images, tok, mc); err != nil {
			return nil, nil, err
		}
		var target []int32
		if nemo {
			target = tok.Encode(chat.NeMoResponse(ex.Completion))
		} else {
			target = tok.Encode(ex.Completion)
		}
		if measure != nil {
			measure(ex.Index, len(prompt), len(target))
		}
		if c.MaxPrompt > 0 && len(prompt) > c.MaxPrompt {
			cut := len(prompt) - c.MaxPrompt
			if len(ex.Images) > 0 && slices.ContainsFunc(prompt[:cut], func(id int32) bool {
				return id == int32(mc.ImageTokenID) || id == int32(mc.BOITokenID) || id == int32(mc.EOITokenID)
			}) {
				return nil, nil, fmt.Errorf("prompt of %d tokens exceeds max_prompt %d, and keeping its last %d tokens would cut an image out", len(prompt), c.MaxPrompt, c.MaxPrompt)
			}
			prompt = prompt[cut:]
		}
		for _, part := range []struct {
			name string
			ids  []int32
		}{{"prompt", prompt}, {"completion", target}} {
			if err := checkVocab(part.name, part.ids, mc.TextConfig.VocabSize); err != nil {
				return nil, nil, err
			}
		}
		if nemo {
			return prompt, nemoTarget(c, target, eos, len(prompt)), nil
		}
		if c.LongTargets == config.LongRandomBlock {
			if c.EOSFill {
				target = append(target, turnEnd)
				for len(target)%c.MaxCanvas != 0 {
					target = append(target, eos)
				}
			}
			return prompt, target, nil
		}
		if len(target) > c.MaxCanvas {
			target = target[:c.MaxCanvas]
		}
		if c.EOSFill {
			if len(target) < c.MaxCanvas {
				target = append(target, turnEnd)
			}
			for len(target) < c.MaxCanvas {
				target = append(target, eos)
			}
		}
		return prompt, target, nil
	}, nil
}

// nemoTarget shapes the response of chat_template nemo (its content and the turn's close,
// already encoded) as NeMo AutoModel's ChatDataset and DLLMCollator do: with random_block
// and eos_fill, EOS to a whole number of canvases counted from the response's start (the
// collator's response-relative block fill); with truncate, cut to max_canvas and EOS-filled
// to it; then, with max_seq_length N, prompt + target cut to their first N tokens
// (seq_length with truncation: the tokenizer keeps the first N tokens of the conversation,
// and the collator's fill stops at N, so a last canvas may be partial). A prompt of N tokens
// or more leaves an empty target, a bad row.
func nemoTarget(c config.Config, target []int32, eos int32, promptLen int) []int32 {
	if c.LongTargets == config.LongRandomBlock {
		for c.EOSFill && len(target)%c.MaxCanvas != 0 {
			target = append(target, eos)
		}
	} else {
		if len(target) > c.MaxCanvas {
			target = target[:c.MaxCanvas]
		}
		for c.EOSFill && len(target) < c.MaxCanvas {
			target = append(target, eos)
		}
	}
	if c.MaxSeqLength > 0 {
		target = target[:max(0, min(len(target), c.MaxSeqLength-promptLen))]
	}
	return target
}

// fillToken is the token eos_fill fills a canvas with: the tokenizer's EOS, as NeMo
// AutoModel's collator takes tokenizer.eos_token_id — tokenizer_config.json's eos_token
// where the checkpoint has that file, else the tokenizer's <eos>, else the model config's
// first EOS id.
func fillToken(modelDir string, tok *tokenizer.Tokenizer, mc *dg.Config) (int32, error) {
	b, err := os.ReadFile(filepath.Join(modelDir, "tokenizer_config.json"))
	switch {
	case err == nil:
		name, perr := eosTokenName(b)
		if perr != nil {
			return 0, fmt.Errorf("eos_fill: %s: %w", filepath.Join(modelDir, "tokenizer_config.json"), perr)
		}
		if name != "" {
			id, ok := tok.TokenID(name)
			if !ok {
				return 0, fmt.Errorf("eos_fill: tokenizer_config.json names eos_token %q, which tokenizer.json does not have", name)
			}
			return id, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("eos_fill: %w", err)
	}
	if id, ok := tok.TokenID("<eos>"); ok {
		return id, nil
	}
	return int32(mc.TextConfig.EOSTokenID[0]), nil
}

// eosTokenName reads eos_token from tokenizer_config.json: a string or an AddedToken
// object ({"content": ...}); "" when the file has none.
func eosTokenName(b []byte) (string, error) {
	var cfg struct {
		EOS json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", err
	}
	if len(cfg.EOS) == 0 || string(cfg.EOS) == "null" {
		return "", nil
	}
	var name string
	if json.Unmarshal(cfg.EOS, &name) == nil {
		return name, nil
	}
	var added struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(cfg.EOS, &added); err != nil {
		return "", fmt.Errorf("eos_token: want a string or {\"content\": ...}: %w", err)
	}
	return added.Content, nil
}

// checkVocab checks that every id of ids indexes the model's embedding: a tokenizer from
// another checkpoint produces ids the model cannot look up, which the engine would only
// notice mid-training.
func checkVocab(part string, ids []int32, vocab int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("token id %d (position %d of the %s) is outside the model's vocabulary of %d: is tokenizer.json from another checkpoint?", id, i, part, vocab)
		}
	}
	return nil
}

// expandImages turns each <|image|> placeholder of prompt into the image block of the
// example's image in the same position (diffusiongemma.md §3.9): boi, one image token per
// soft token, eoi. Placeholders and images must pair up one for one.
func expandImages(prompt []int32, images []*imageproc.Source, tok *tokenizer.Tokenizer, mc *dg.Config) ([]int32, error) {
	img := int32(mc.ImageTokenID)
	n := 0
	for _, id := range prompt {
		if id == img {
			n++
		}
	}
	if n == 0 && len(images) == 0 {
		return prompt, nil
	}
	if n != len(images) {
		return nil, fmt.Errorf("prompt has %d image placeholder(s) %s but the example has %d image(s)", n, chat.ImagePlaceholder, len(images))
	}
	if id, ok := tok.TokenID(chat.ImagePlaceholder); !ok || id != img {
		return nil, fmt.Errorf("the tokenizer's %s is id %d (present %v), the model's image_token_id is %d", chat.ImagePlaceholder, id, ok, img)
	}
	soft, err := mc.SoftTokens(images)
	if err != nil {
		return nil, err
	}
	return dg.ExpandImageTokens(prompt, mc, soft)
}
