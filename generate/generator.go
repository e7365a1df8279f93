package generate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dgtune/dgtune/data/chat"
	dg "github.com/dgtune/dgtune/model/diffusiongemma"
	"github.com/dgtune/dgtune/mx"
	_ "github.com/dgtune/dgtune/mx/engines" // the engines register themselves
	"github.com/dgtune/dgtune/tokenizer"
)

// Generator answers conversations with one model (and whatever adapter is mounted on it).
type Generator struct {
	Model     *dg.Model
	Tokenizer *tokenizer.Tokenizer
	// Options are the sampler's; Reply sets OnBlock and Interrupt on its own copy.
	Options dg.GenerateOptions
	// System, when not empty, is a system turn put before every conversation.
	System string
	// OnPrompt, when set, sees each conversation as rendered (system turn included) and its
	// prompt ids before generation starts: the seam that lets a test check what a chat's
	// second turn was conditioned on.
	OnPrompt func(turns []chat.Message, ids []int32)
}

// Load opens the named engine (auto, go or mlx) and loads the checkpoint in dir and its
// tokenizer.json, with the checkpoint's default sampler options.
func Load(backend, dir string) (*Generator, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--model %q: not found", dir)
	}
	e, err := mx.Open(backend)
	if err != nil {
		return nil, err
	}
	m, err := dg.Load(e, dir, dg.LoadOptions{})
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	g := &Generator{Model: m, Tokenizer: tok, Options: dg.DefaultGenerateOptions(m.Config)}
	g.Options.EOS = stopTokens(g.Options, tok)
	return g, nil
}

// Reply is one generated answer and how it was made.
type Reply struct {
	Text         string
	PromptTokens int
	Result       *dg.GenerateResult
	Elapsed      time.Duration // prompt encoding and every block
}

// TokensPerSecond is the answer's tokens over the whole time (prompt encoding included),
// as eval's generated tokens/s.
func (r *Reply) TokensPerSecond() float64 {
	return float64(len(r.Result.Tokens)) / max(r.Elapsed.Seconds(), 1e-9)
}

// Summary is the closing line on stderr: tokens/s, blocks and denoising steps.
func (r *Reply) Summary() string {
	res := r.Result
	return fmt.Sprintf("%d tokens in %s, %s (%s), %.2f s: %.1f tokens/s; prompt %d tokens",
		len(res.Tokens), plural(res.Blocks, "block"), plural(res.Steps, "denoising step"), finishWords(res.FinishReason),
		r.Elapsed.Seconds(), r.TokensPerSecond(), r.PromptTokens)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func finishWords(reason string) string {
	if reason == dg.FinishStop {
		return "stopped at an end token"
	}
	return "reached --max-tokens"
}

// Prompt renders turns (after the system turn, if any) with the chat template and the
// generation prompt, and encodes them.
func (g *Generator) Prompt(turns []chat.Message) ([]chat.Message, []int32, error) {
	var msgs []chat.Message
	if strings.TrimSpace(g.System) != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: g.System})
	}
	msgs = append(msgs, turns...)
	ids, err := chat.EncodePrompt(g.Tokenizer, msgs, true)
	if err != nil {
		return nil, nil, err
	}
	if limit := g.Model.Config.TextConfig.MaxPositionEmbeddings; limit > 0 && len(ids)+g.Options.MaxTokens > limit {
		return nil, nil, fmt.Errorf("the prompt is %d tokens: with --max-tokens %d that is more than the model's max_position_embeddings %d",
			len(ids), g.Options.MaxTokens, limit)
	}
	return msgs, ids, nil
}

// Reply answers the conversation turns, writing the text of each block to out as soon as
// the block is final. A cancelled ctx stops it before the next decoder pass with an error
// wrapping dg.ErrInterrupted; the text of the finished blocks has been written then.
func (g *Generator) Reply(ctx context.Context, turns []chat.Message, out io.Writer) (*Reply, error) {
	msgs, ids, err := g.Prompt(turns)
	if err != nil {
		return nil, err
	}
	if g.OnPrompt != nil {
		g.OnPrompt(msgs, ids)
	}
	st := &textStream{tok: g.Tokenizer, w: out}
	opt := g.Options
	opt.Interrupt = ctx.Err
	opt.OnBlock = func(b dg.BlockInfo) {
		if st.err == nil {
			st.err = st.add(b.Tokens, b.Last)
		}
	}
	start := time.Now()
	res, err := g.Model.Generate(ids, opt)
	r := &Reply{PromptTokens: len(ids), Result: res, Elapsed: time.Since(start)}
	if res != nil {
		r.Text = g.Tokenizer.Decode(res.Tokens, true)
	}
	if err != nil {
		return r, err
	}
	if st.err == nil {
		st.err = st.end()
	}
	if st.err != nil {
		return r, fmt.Errorf("write the answer: %w", st.err)
	}
	return r, nil
}

// textStream writes the decoded text of a growing token sequence. Each write is the
// difference between the decodings of all tokens so far and of those before; a trailing
// U+FFFD is held back until the last block, since it may be a character whose bytes are
// split across blocks (byte-fallback tokens), decoded whole once the rest arrives.
type textStream struct {
	tok     *tokenizer.Tokenizer
	w       io.Writer
	ids     []int32
	written string
	err     error
}

func (s *textStream) add(ids []int32, last bool) error {
	s.ids = append(s.ids, ids...)
	text := s.tok.Decode(s.ids, true)
	if !last {
		for strings.HasSuffix(text, string(utf8.RuneError)) {
			text = strings.TrimSuffix(text, string(utf8.RuneError))
		}
	}
	// Decoding a longer sequence only appends (decoders strip a leading space at the start
	// only). Were it ever to rewrite earlier text, what was written stands and the text
	// beyond its length follows, from a character boundary.
	n := len(s.written)
	if len(text) <= n {
		return nil
	}
	for n < len(text) && !utf8.RuneStart(text[n]) {
		n++
	}
	_, err := io.WriteString(s.w, text[n:])
	s.written = text
	return err
}

// end closes the answer with a newline.
func (s *textStream) end() error {
	_, err := io.WriteString(s.w, "\n")
	return err
}
