// Package convert turns an unquantized DiffusionGemma checkpoint — transformers'
// save_pretrained layout or an MLX bf16/f32 one — into an MLX-layout quantized checkpoint,
// as `mlx_vlm.convert -q` (mlx-lm's convert for vision-language models) does: sharded
// safetensors with model.safetensors.index.json, config.json with MLX's quantization map
// (also as quantization_config), and the tokenizer, generation config and other side
// files copied.
//
// It streams: every tensor is read in row chunks with pread (dgtune never maps the input,
// so pages read stay in the page cache, not in the process), cast, quantized on the
// chosen engine and written at its final offset into shards whose headers were written
// first (safetensors.Planned). Peak memory is a few chunks (ChunkBytes), not a tensor.
// Everything is written into a hidden staging directory beside the output and renamed
// into place at the end, so a failure or a signal never leaves a partial checkpoint.
package convert
