// Package interop holds dgtune's checks against the Hugging Face implementations it
// exchanges files with: transformers' DiffusionGemmaForBlockDiffusion and PEFT.
//
// hf_golden.py (run where torch, transformers ≥ 5.13 and peft are installed) builds small
// random models with transformers, saves them with save_pretrained, makes PEFT adapters and
// writes reference logits, losses and LoRA gradients under testdata/hf/. The tests here load
// those files with dgtune and compare, so CI checks dgtune against transformers' own numbers
// without Python. peft_roundtrip.py goes the other way: it mounts dgtune's PEFT export with
// PeftModel.from_pretrained and writes transformers' logits for a Go test to compare with
// dgtune's.
package interop
