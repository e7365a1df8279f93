# Convenience targets. The README's two commands work without make.
GO ?= go

.PHONY: test demo demo-data demo-base build

test:
	$(GO) test ./...

# bin/train, bin/eval, bin/generate, bin/export, bin/probe
build:
	$(GO) build -o bin/ ./cmd/...

# The embedded demo: LoRA-tune the committed tiny base on the shift task, compare, then try it.
demo:
	$(GO) run ./cmd/train --config configs/tiny.yaml
	$(GO) run ./cmd/eval --config configs/tiny.yaml --adapter checkpoints/tiny-demo
	$(GO) run ./cmd/generate --adapter checkpoints/tiny-demo --prompt "shift: ddhc"

# Regenerate the demo's data sets (deterministic: same seed, same files).
demo-data:
	$(GO) run ./cmd/probe mkdata --task copy --seed 1 --out demo/data/copy
	$(GO) run ./cmd/probe mkdata --task shift --seed 2 --train 500 --out demo/data/shift

# Regenerate demo/base: random tiny weights, then full fine-tuning on the copy task
# (about 1 minute on 2 cores with the go engine).
demo-base:
	$(GO) run ./cmd/probe mkmodel --preset tiny --sliding-window 64 --seed 0 --tokenizer bytes --out checkpoints/tiny-init
	$(GO) run ./cmd/train --config configs/pretrain-tiny.yaml
	mkdir -p demo/base
	cp checkpoints/tiny-pretrain/config.json checkpoints/tiny-pretrain/generation_config.json \
	   checkpoints/tiny-pretrain/tokenizer.json checkpoints/tiny-pretrain/model.safetensors demo/base/
