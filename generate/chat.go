package generate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dgtune/dgtune/data/chat"
)

// Words a chat line may be instead of a message.
const (
	CommandExit  = "/exit"
	CommandQuit  = "/quit"
	CommandReset = "/reset"
)

// ChatPrompt is written to the log before each line is read from a terminal.
const ChatPrompt = ">>> "

// Chat holds a conversation: each line read is a user turn, answered with every earlier
// turn of the conversation in the prompt (as mlx_lm.chat and ollama run do).
type Chat struct {
	Generator *Generator
	In        io.Reader
	Out       io.Writer // the answers
	Log       io.Writer // the prompt marker, help and the per-answer summary
	// Interactive writes ChatPrompt before each line (In is a terminal).
	Interactive bool
	// Turns is the conversation so far; Run appends to it.
	Turns []chat.Message
}

// Run answers first (when not empty) and then every line of In until the end of In,
// /exit or /quit; /reset forgets the turns so far; empty lines are skipped. A turn whose
// prompt would no longer fit the model drops the oldest exchanges, and says so.
func (c *Chat) Run(ctx context.Context, first string) error {
	if c.Interactive {
		fmt.Fprintf(c.Log, "chat: one message per line; %s or Ctrl-D to leave, %s to start over\n", CommandExit, CommandReset)
	}
	if strings.TrimSpace(first) != "" {
		if err := c.turn(ctx, first); err != nil {
			return err
		}
	}
	sc := bufio.NewScanner(c.In)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for {
		if c.Interactive {
			fmt.Fprint(c.Log, ChatPrompt)
		}
		if !sc.Scan() {
			if c.Interactive {
				fmt.Fprintln(c.Log)
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("read the conversation: %w", err)
			}
			return nil
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
			continue
		case CommandExit, CommandQuit:
			return nil
		case CommandReset:
			c.Turns = nil
			fmt.Fprintln(c.Log, "chat: the conversation starts over")
			continue
		}
		if err := c.turn(ctx, line); err != nil {
			return err
		}
	}
}

// turn answers one user message and records the exchange.
func (c *Chat) turn(ctx context.Context, text string) error {
	turns := append(c.Turns, chat.Message{Role: "user", Content: text})
	dropped := 0
	for len(turns) > 1 {
		if _, _, err := c.Generator.Prompt(turns); err == nil {
			break
		}
		turns = turns[2:] // the oldest user message and its answer
		dropped++
	}
	if dropped > 0 {
		fmt.Fprintf(c.Log, "chat: the conversation no longer fits the model's max_position_embeddings: dropped its first %s\n", plural(dropped, "exchange"))
	}
	r, err := c.Generator.Reply(ctx, turns, c.Out)
	if err != nil {
		return err
	}
	c.Turns = append(turns, chat.Message{Role: "model", Content: r.Text})
	fmt.Fprintln(c.Log, r.Summary())
	return nil
}
