// Package train runs LoRA (or full) fine-tuning of DiffusionGemma with the denoising
// objective: it loads the base checkpoint, tokenizer and data, attaches adapters, and
// loops evaluate → step → report → save, with exact resume from the training state
// it writes under adapter_path.
//
// Randomness is stateless: the noise of step s, example b comes from a key derived
// from (seed, s, b), and validation corruption from (seed, example index). Resuming at
// step k therefore replays exactly what an uninterrupted run would have done.
package train
