package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// The template's structural tokens. They must be special tokens of the tokenizer so that
// encoding the rendered text never splits them.
const (
	BOS          = "<bos>"
	TurnOpen     = "<|turn>"
	TurnClose    = "<turn|>"
	ChannelOpen  = "<|channel>"
	ChannelClose = "<channel|>"
	// ImagePlaceholder marks where an image goes in a user message.
	ImagePlaceholder = "<|image|>"
	// GenerationPrompt opens the model's turn with an empty, already closed thought channel.
	GenerationPrompt = TurnOpen + "model\n" + ChannelOpen + "thought\n" + ChannelClose
	// NeMoGenerationPrompt is the generation prompt of NeMo AutoModel's chat template
	// (examples/dllm_sft/diffusion_gemma_chat_template.jinja): the model's turn opened, no
	// thought channel. Its response is NeMoResponse.
	NeMoGenerationPrompt = TurnOpen + "model\n"
)

// ErrNoMessages is returned for an empty conversation.
var ErrNoMessages = errors.New("chat: no messages")

// roleWord maps a message role to the word written after <|turn>.
func roleWord(role string) (string, bool) {
	switch role {
	case "system":
		return "system", true
	case "user":
		return "user", true
	case "assistant", "model":
		return "model", true
	}
	return "", false
}

// Render writes msgs in the DiffusionGemma chat template. With addGenerationPrompt the text
// ends with GenerationPrompt, ready for the model to fill in its answer.
func Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	gen := ""
	if addGenerationPrompt {
		gen = GenerationPrompt
	}
	return render(msgs, gen)
}

// RenderNeMo writes msgs as NeMo AutoModel's chat template does, ending with
// NeMoGenerationPrompt: the turns are rendered as Render renders them (content trimmed,
// thought channels stripped from model turns).
func RenderNeMo(msgs []Message) (string, error) { return render(msgs, NeMoGenerationPrompt) }

// NeMoResponse is the supervised text of a final model turn under NeMo AutoModel's
// template, its {% generation %} block: the content with thought channels stripped,
// trimmed, then the turn's close "<turn|>\n" (whose newline is a canvas token too).
func NeMoResponse(content string) string { return trim(stripThinking(content)) + TurnClose + "\n" }

func render(msgs []Message, generationPrompt string) (string, error) {
	if len(msgs) == 0 {
		return "", ErrNoMessages
	}
	var b strings.Builder
	b.WriteString(BOS)
	for i, m := range msgs {
		role, ok := roleWord(m.Role)
		if !ok {
			return "", fmt.Errorf("chat: message %d: unknown role %q (want system, user, assistant or model)", i, m.Role)
		}
		content := m.Content
		if role == "model" {
			content = stripThinking(content)
		}
		b.WriteString(TurnOpen)
		b.WriteString(role)
		b.WriteByte('\n')
		b.WriteString(trim(content))
		b.WriteString(TurnClose)
		b.WriteByte('\n')
	}
	b.WriteString(generationPrompt)
	return b.String(), nil
}

// stripThinking drops thought channels from an earlier model turn, as the upstream
// template's strip_thinking macro does: the text is cut at each <channel|>, and in each
// piece everything from <|channel> on is dropped.
func stripThinking(s string) string {
	if !strings.Contains(s, ChannelClose) && !strings.Contains(s, ChannelOpen) {
		return s
	}
	var b strings.Builder
	for _, part := range strings.Split(s, ChannelClose) {
		if i := strings.Index(part, ChannelOpen); i >= 0 {
			part = part[:i]
		}
		b.WriteString(part)
	}
	return b.String()
}

// trim is Jinja's trim filter, i.e. Python's str.strip(): Unicode whitespace plus the
// information separators U+001C..U+001F, which Python also counts as whitespace.
func trim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
	})
}

// Encoder is what EncodePrompt needs from a tokenizer; *tokenizer.Tokenizer satisfies it.
// Encode must be the plain encoding (no BOS added): the template writes <bos> itself.
type Encoder interface {
	Encode(text string) []int32
	TokenID(tok string) (int32, bool)
}

// EncodePrompt renders msgs and encodes the text. It checks that the template's structural
// tokens are tokens of tok, and that the ids start with exactly one BOS.
func EncodePrompt(tok Encoder, msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	text, err := Render(msgs, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	need := []string{BOS, TurnOpen, TurnClose}
	if addGenerationPrompt {
		need = append(need, ChannelOpen, ChannelClose)
	}
	return encode(tok, text, need)
}

// EncodePromptNeMo is EncodePrompt with NeMo AutoModel's template (RenderNeMo).
func EncodePromptNeMo(tok Encoder, msgs []Message) ([]int32, error) {
	text, err := RenderNeMo(msgs)
	if err != nil {
		return nil, err
	}
	return encode(tok, text, []string{BOS, TurnOpen, TurnClose})
}

func encode(tok Encoder, text string, need []string) ([]int32, error) {
	for _, s := range need {
		if _, ok := tok.TokenID(s); !ok {
			return nil, fmt.Errorf("chat: the tokenizer has no %s token", s)
		}
	}
	bos, _ := tok.TokenID(BOS)
	ids := tok.Encode(text)
	if len(ids) == 0 || ids[0] != bos {
		return nil, fmt.Errorf("chat: the encoded prompt does not start with %s (id %d); is %s a special token of the tokenizer?", BOS, bos, BOS)
	}
	if len(ids) > 1 && ids[1] == bos {
		return nil, fmt.Errorf("chat: the encoded prompt starts with two %s; the tokenizer's Encode must not add one", BOS)
	}
	return ids, nil
}
