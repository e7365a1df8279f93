// Package train runs LoRA (or full) fine-tuning of DiffusionGemma with the denoising
// objective: it loads the base checkpoint, tokenizer and data (package session), attaches
// adapters, evaluates the initial adapter and loops step → report → evaluate → save, with
// exact resume from the training state it writes under adapter_path. run.go is the place
// to start reading; each stage has its file (prepare, step, validate, save, state).
//
// Randomness is stateless: the noise of step s, example b comes from a key derived
// from (seed, s, b), and validation corruption from (seed, example index). Resuming at
// step k therefore replays exactly what an uninterrupted run would have done.
//
// A run started as one rank of a data-parallel group (MLX's ring or NCCL variables as
// mlx.launch and train --launch set them, mpirun, or distributed: ring|nccl|mpi|any) trains
// its share of every global batch and sums gradients, losses and token counts with the
// other ranks in one all_sum per step; only rank 0 writes. Because keys name examples by
// their index in the global batch, the numbers do not depend on the number of ranks
// beyond float summation order. A side channel (internal/peers) ends every rank, naming
// the culprit, when one dies, hangs or fails.
package train
