// Package session opens what a training run and an evaluation work on, as the config
// names it: the engine, the base model (in its compute dtype, quantized on load when
// asked), the tokenizer, the loss options and the data, tokenized by the encoder both
// share. DeriveSeed turns the run's seed into the independent keys of its random streams.
//
// train and evaluate both start from Open, so a model scored by eval sees exactly the
// tokens it was trained on.
package session
