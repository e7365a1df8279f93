// Package lora adds low-rank adapters to DiffusionGemma's linears and handles their files.
//
// A [Linear] wraps a base linear (dense or affine-quantized) and adds the low-rank residual
// of diffusiongemma.md §5.3:
//
//	y = base(x) + cast_to_dtype_of_x( scale · ((dropout(x) · A) · B) )
//
// with A [in, r] and B [r, out] in float32 and scale used as is (no α/r division).
//
// An [Adapter] is a set of such layers installed in a model in place, through
// Model.LinearSlot: [Attach] creates a fresh one (A uniform in ±1/√in from seeded keys,
// B zero, so the adapted model is the base model at step 0), [Mount] installs one read from
// disk after checking every tensor against the model (all or nothing). Because the encoder
// pass reuses the decoder's layers, one adapter acts in both passes by default; an adapter
// may instead give the encoder pass weights of its own, or none (Config.Encoder
// "separate", Linear.Encoder), which is what PEFT adapters trained on transformers are. Adapters stack: a second
// one mounted on the same model adds its residual to the first one's output, and [Adapter.Detach]
// unlinks an adapter wherever it sits in such a chain.
//
// Files (diffusiongemma.md §6, product.md §6): [Save] and [WriteConfig] write the mlx-lm/optiq
// layout (adapters.safetensors with "<module>.lora_a" f32 [in, r] and "<module>.lora_b" f32
// [r, out], adapter_config.json); [LoadFile] and [LoadDir] read that layout and HF PEFT's
// (lora_A.weight [r, in], lora_B.weight [out, r]) into one canonical [AdapterFile];
// [ExportPEFT] writes PEFT's; [Merge] concatenates two adapters along the rank axis (exact);
// [FuseTensors] folds an adapter into the base weights, re-quantizing quantized modules with
// their own bits and group size; [FuseCheckpoint] does it to a checkpoint directory as stored
// (computed in float32, stored in the checkpoint's dtypes), writes the complete fused
// checkpoint ([FusedCheckpoint.Write]) and compares it with base+adapter on a seeded input
// ([FusedCheckpoint.Probe]).
//
// Choices where the references are silent or disagree, and why:
//   - num_layers 0 (absent) means all layers: optiq writes no num_layers and adapts all 30.
//   - A missing lora_parameters.scale defaults to mlx-lm's 20; a PEFT config without
//     lora_parameters gives scale = lora_alpha/r (lora_alpha/√r with use_rslora).
//   - Tensor orientation is read from the name: "….weight" (PEFT) is [r, in]/[out, r],
//     anything else (mlx-lm) is [in, r]/[r, out].
//   - Merge pads a module present in only one adapter with zero rank columns, so the merged
//     file has one rank everywhere and stays loadable by mlx-lm and PEFT; the padding adds
//     exactly zero.
//   - Fuse with dequantize stores only the adapted modules dense (their quantization entries
//     become false); every other tensor passes through as it is.
package lora
