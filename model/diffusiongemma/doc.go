// Package diffusiongemma describes the DiffusionGemma block-diffusion MoE language model
// (model_type "diffusion_gemma"): its configuration, the synthetic presets used by tests and
// `probe mkmodel`, the table of tensors a checkpoint must hold, and the encoder/decoder forward
// pass built on top of them.
//
// The configuration half (config*.go, presets.go, tensors.go) is pure Go with no array library:
// everything in it can be checked from a config.json alone, which is how the real 26B-A4B
// geometry is tested on machines that could never hold its weights.
//
// # The tensor table
//
// layerspec.go lists every text-model tensor once (tensorTable): its name, its logical shape
// as a function of the config, its kind (which decides whether it is quantizable) and the
// Model field that holds it. Build, ExpectedTensors, LoRAKeys/LoRATargets, LinearSlot,
// DenseTensors and the memory estimate's weights (StoredTensors, WeightArrays) iterate it; a
// new tensor is one row.
//
// # Loading a config
//
// [LoadConfig] reads DIR/config.json in either of the two published layouts
// (diffusiongemma.md §1.1):
//
//   - nested: the text model lives under "text_config" (google and mlx-community conversions);
//   - flat: mlx-optiq's OptiQ checkpoints carry only token ids, canvas_length, vision_config and
//     the quantization map at the top level. Text fields are then read from the top level and
//     everything absent is back-filled from the real model's values (§1.2).
//
// In both layouts the rule is text = defaults ⊕ (text_config, or the top level). Unknown keys are
// ignored. The generation config is taken, in order of precedence, from DIR/generation_config.json
// (if the file exists, it replaces the embedded one entirely), from the "generation_config" object
// embedded in config.json, or from the §1.5 defaults. Missing keys inside whichever object is used
// are filled from §1.5, except the stable-and-confident stop rule, which is on only when the
// chosen object provides confidence_threshold, stability_threshold or diffusion_stopping_config.
package diffusiongemma
