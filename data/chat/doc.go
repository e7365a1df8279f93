// Package chat renders conversations in DiffusionGemma's chat template (the Gemma 4 family
// format, spec diffusiongemma.md §7.2) and turns them into prompt ids.
//
// A rendered conversation starts with exactly one <bos>, puts each message in a turn
// `<|turn>{role}\n{content}<turn|>\n` (the assistant's role word is "model"), and, when a
// generation prompt is asked for, ends with `<|turn>model\n<|channel>thought\n<channel|>`:
// a model turn whose thought channel is already closed, because the diffusion decoder cannot
// reliably close an open one, so thinking stays off. Contents are trimmed as the upstream
// template's `| trim` does, thought channels are stripped from earlier model turns, and the
// image placeholder <|image|> passes through verbatim for the model code to expand.
package chat
