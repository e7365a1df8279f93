// Package estimate predicts the peak memory of one LoRA training step of a DiffusionGemma
// config on the go engine, without reading or allocating a weight: it runs the real step —
// the base weights as the loader holds them, adapters attached, the objective's loss, the
// gradient through encoder and decoder, the AdamW update — on the shape-only engine
// (package shapeeng), which records every array's size and lifetime as the go engine would
// hold it. The peak of the recorded live bytes, plus the garbage Go's collector lets
// accumulate, is the estimate (`probe estimate`, and the data check before `train`).
//
// Measured against the go engine: the live heap of the tiny and small presets' steps
// within 1.5× (TestEstimateTracksEngine), and the peak resident memory of the real 26B-A4B
// geometry on the device within a few percent (README, bench/results).
//
// With Options.Engine "mlx" it predicts MLX's peak counter instead: the same recording,
// every weight in MLX's memory in the compute dtype, no GC headroom (TestEstimateTracksMLX,
// and the README's table of the cases it was checked on).
package estimate
