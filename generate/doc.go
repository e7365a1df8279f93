// Package generate is what the generate command does with a model, as mlx_lm.generate and
// mlx_lm.chat do: render a conversation with the chat template (and an optional system
// prompt), run the block-diffusion sampler of model/diffusiongemma on it, stream each
// finished block's text, and keep a multi-turn chat's earlier turns in the prompt. It also
// reads what an adapter's adapter_config.json records about its training where that changes
// how to generate (the canvas it learned on, whether it learned to stop).
package generate
