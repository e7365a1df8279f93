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
//
// A config written for mlx-lm's `mlx_lm.lora` loads as written (mlxlm.go): its keys are
// dgtune's where the meaning is the same, honoured where they mean something of their own
// here (train, test, test_batches, resume_adapter_file, max_seq_length, mask_prompt,
// optimizer_config.<optimizer>.*), and otherwise accepted with a note saying why they do
// nothing (report_to, project_name, hf_dataset, trust_remote_code, clear_cache_threshold).
package config
