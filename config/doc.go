// Package config is dgtune's one configuration: the keys that train, eval and export
// read from a YAML file, from DGTUNE_* environment variables and from command-line
// flags, with the precedence flag > environment > file > default.
//
// Key names follow mlx-lm's LoRA config where the meaning is the same (iters,
// batch_size, val_batches, steps_per_report, steps_per_eval, save_every, adapter_path,
// num_layers, grad_accumulation_steps, lora_parameters, lr_schedule). Every key is also
// a flag, spelled with '-' for '_' ("--learning-rate", "--lora-parameters.rank"), and
// an environment variable with the DGTUNE_ prefix and '_' for '.'
// ("DGTUNE_LORA_PARAMETERS_RANK"). A key in the file that dgtune does not know is an
// error naming the nearest valid key.
package config
