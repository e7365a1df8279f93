// Package dgtest gives tests a synthetic DiffusionGemma: a preset's config, random weights
// drawn from a seed and quantized by a bits policy (diffusiongemma.Synthesize), the model
// built from them, and a checkpoint directory with the byte-level synthetic tokenizer.
//
// The same Spec always yields the same bytes, so a test's expected numbers stay tied to its
// seed. The generators themselves (Synthesize, WriteCheckpoint, WriteSynthetic*Shards, the
// presets) stay in the model package: `probe mkmodel` uses them outside tests, and the model
// package's own internal tests need them without importing a package that imports it. This
// package only wraps them in the testing.TB form every test wrote by hand.
package dgtest
