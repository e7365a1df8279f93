// Package objective holds DiffusionGemma's denoising training objective: corrupt a
// completion canvas by uniform-random replacement at noise level t, run the model over
// (prompt, corrupted canvas), and score cross-entropy against the clean completion.
//
// The reference (mlx-optiq) objective is the default: t ~ U(t_min, t_max) per example,
// each canvas position corrupted iff u < t, cross-entropy averaged over corrupted
// positions. Options cover scoring all positions, weighting by 1/t and fixed noise
// levels for evaluation. An Objective is a value; the trainer never branches on which
// one it got.
package objective
