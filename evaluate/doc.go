// Package evaluate scores a base model, alone or side by side with an adapter, on a
// held-out split: denoising loss and canvas-token accuracy at fixed noise levels, and
// generation quality with the denoising sampler (exact match, token F1, steps,
// throughput). Base and adapter see byte-identical corruptions and sampler seeds, so
// every difference is the adapter's.
package evaluate
