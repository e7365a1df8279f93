// Package optim holds the optimizers, learning-rate schedules, gradient clipping and
// gradient accumulation the trainer uses, written against mx and shaped after
// mlx.optimizers so that a run on the mlx engine follows the same trajectory as
// optiq/mlx-lm.
//
// Parameters are a named set, [Params] (map from the parameter's full name, e.g.
// "model.decoder.layers.0.self_attn.q_proj.lora_a", to its array). Names, not positions,
// key everything — gradients, optimizer state, checkpoints — so a saved state cannot be
// applied to the wrong tensor when the set of trainable parameters changes. Whenever
// order matters (summing a global norm, listing errors) names are visited sorted.
//
// A gradient pass is [ValueAndGrad] over a [Trainable] (a LoRA adapter, or the model's
// own tensors for full fine-tuning): the one place that installs traced arrays into the
// model and restores the step's afterwards, returning an install error rather than
// panicking. The trainer, the probe's bench and the tests all call it.
//
// Optimizers ([Adam] in its Adam and AdamW forms, [SGD]) follow MLX's arithmetic operation
// by operation: the step counter is advanced before the update (so bias correction sees
// t = 1 on the first update), scalars are cast to the parameter's dtype as MLX casts
// Python scalars, and the learning rate is held as float32 as MLX holds it in an array.
// A schedule is evaluated by the caller at the step count before the update, exactly
// where MLX evaluates it:
//
//	opt.SetLearningRate(schedule(opt.Step()))
//	params = opt.Update(params, grads)
//
// Optimizer state is exposed as a flat map with stable names ("m.<param>", "v.<param>")
// plus the step, which the trainer writes to and reads back from a safetensors file; a
// resumed optimizer continues bit-identically.
//
// Memory: on the mlx engine arrays live in C memory, so ownership is explicit. An
// optimizer owns its state arrays: Update and LoadState free the arrays they replace, so
// arrays returned by State are valid only until the next Update or LoadState (write
// them out before then), and LoadState takes ownership of the arrays it is given.
// Update runs its arithmetic inside mx.Tidy and never frees the caller's params or
// grads; a caller that wraps a step in its own Tidy must return the new params and the
// State() arrays from it. The [Accumulator] likewise owns its running sums (it never
// keeps the caller's arrays) and lists them in Arrays for such a Tidy.
package optim
