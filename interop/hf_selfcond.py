#!/usr/bin/env python3
"""Reference data for `probe forward --self-cond` from transformers' DiffusionGemma.

Builds a small random DiffusionGemmaForBlockDiffusion with transformers, writes it in the MLX
layout dgtune loads (config.json in the nested layout with explicit global_head_dim /
num_global_key_value_heads, model.safetensors with the MLX sanitize rules applied), and
writes golden.safetensors with transformers' own numbers:

  logits_first        decoder pass without self-conditioning            f32 [1, L, V]
  logits_sc           decoder pass with self_conditioning_logits =
                      logits_first (the two-pass step)                  f32 [1, L, V]
  lora.logits_first   the same two passes with a LoRA adapter on q/k/v/o/gate/up/down,
  lora.logits_sc      one A/B pair per linear shared by the encoder and decoder passes
                      (dgtune's default adapter)
  lora.loss           mean CE of lora.logits_sc over every canvas position (loss-positions
                      all), the first pass held constant (no_grad), plus 1.0 × the
                      encoder's next-token CE over prompt + target (encoder_last_hidden_state
                      through the tied head and the softcap)                f32 [1]
  lora.encoder_loss   that encoder CE alone                                f32 [1]
  lora.grad.<K>       d lora.loss / d K for every tensor K of adapter/adapters.safetensors,
                      in dgtune's layout (lora_a [in, r], lora_b [r, out])
  prompt, canvas, target, corrupt   the inputs, int32

and adapter/{adapters.safetensors, adapter_config.json} (mlx-lm / optiq layout).

The Go test cmd/probe/hf_selfcond_test.go compares `probe forward` against these numbers
(tolerance 2e-4); copy OUTDIR to cmd/probe/testdata/hf_selfcond to enable it.

Usage (torch, transformers >= 5.13 with DiffusionGemma, safetensors; CPU is enough):
    python interop/hf_selfcond.py OUTDIR

Everything is float32 on the CPU, attention eager, seeded: the same versions give the same
bytes. No weights are downloaded.
"""

import argparse
import json
import math
import os
import sys

# Geometry: the tiny preset's shape, smaller (the files stay well under 500 KB). The sliding
# window is longer than any sequence here: this check is about self-conditioning; the window
# itself is checked against transformers by interop/hf_golden.py's long-prompt case.
GEOM = dict(vocab=256, hidden=32, intermediate=64, moe_intermediate=16, layers=2, heads=2,
            kv_heads=1, global_kv_heads=1, head_dim=16, global_head_dim=32, window=32,
            experts=4, top_k=2, canvas=16)
LAYER_TYPES = ["sliding_attention", "full_attention"]
ROPE = {
    "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
}
IMAGE_IDS = dict(boi=253, image=254, eoi=255)

PROMPT = [2, 105, 7, 8, 40, 41, 106, 107, 105, 100]
CANVAS = [5, 9, 200, 4, 77, 31, 250, 12]
TARGET = [6, 9, 201, 1, 77, 30, 251, 12]
CORRUPT = [1, 0, 1, 1, 0, 1, 1, 0]

LORA_KEYS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
LORA_RANK, LORA_SCALE = 2, 4.0
ENCODER_LOSS_WEIGHT = 1.0
SEED = 17


def dgtune_config():
    """config.json in the nested (google / mlx-community) layout dgtune reads."""
    g = GEOM
    text = {
        "model_type": "diffusion_gemma_text",
        "vocab_size": g["vocab"],
        "hidden_size": g["hidden"],
        "intermediate_size": g["intermediate"],
        "moe_intermediate_size": g["moe_intermediate"],
        "num_hidden_layers": g["layers"],
        "num_attention_heads": g["heads"],
        "num_key_value_heads": g["kv_heads"],
        "num_global_key_value_heads": g["global_kv_heads"],
        "head_dim": g["head_dim"],
        "global_head_dim": g["global_head_dim"],
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "sliding_window": g["window"],
        "layer_types": LAYER_TYPES,
        "rope_parameters": ROPE,
        "final_logit_softcapping": 30.0,
        "num_experts": g["experts"],
        "top_k_experts": g["top_k"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": True,
        "use_bidirectional_attention": "vision",
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
        "dtype": "float32",
        "initializer_range": 0.02,
    }
    return {
        "architectures": ["DiffusionGemmaForBlockDiffusion"],
        "model_type": "diffusion_gemma",
        "canvas_length": g["canvas"],
        "eos_token_id": [1, 106],
        "boi_token_id": IMAGE_IDS["boi"],
        "eoi_token_id": IMAGE_IDS["eoi"],
        "image_token_id": IMAGE_IDS["image"],
        "tie_word_embeddings": True,
        "text_config": text,
    }


# transformers builds a vision tower whatever the config says (vision_config None is refused),
# so the model gets a tiny one (as interop/hf_golden.py does); it is not exported.
VISION = dict(model_type="gemma4_vision", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=2, num_key_value_heads=2, head_dim=16, patch_size=16, pooling_kernel_size=3,
              position_embedding_size=64, standardize=True, use_clipped_linears=False)


def build_model():
    import torch
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    g = GEOM
    text = dict(
        vocab_size=g["vocab"], hidden_size=g["hidden"], intermediate_size=g["intermediate"],
        moe_intermediate_size=g["moe_intermediate"], num_hidden_layers=g["layers"],
        num_attention_heads=g["heads"], num_key_value_heads=g["kv_heads"], head_dim=g["head_dim"],
        global_head_dim=g["global_head_dim"], num_global_key_value_heads=g["global_kv_heads"],
        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=4096, rms_norm_eps=1e-6,
        sliding_window=g["window"], layer_types=list(LAYER_TYPES), rope_parameters=json.loads(json.dumps(ROPE)),
        num_experts=g["experts"], top_k_experts=g["top_k"], use_bidirectional_attention="vision",
        final_logit_softcapping=30.0, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=dict(VISION), canvas_length=g["canvas"],
                               boi_token_id=IMAGE_IDS["boi"], eoi_token_id=IMAGE_IDS["eoi"],
                               image_token_id=IMAGE_IDS["image"])
    cfg._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = DiffusionGemmaForBlockDiffusion(cfg).eval()
    model.config._attn_implementation = "eager"
    return model.float()


def randomize(model):
    """Random weights with unit-scale activations, the encoder's copies equal to the
    decoder's (the checkpoint has one set), separate encoder layer scalars."""
    import torch

    gen = torch.Generator().manual_seed(SEED)
    dec = model.model.decoder
    with torch.no_grad():
        for name, p in dec.named_parameters():
            if name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            elif "norm" in name or name.endswith("router.scale") or name.endswith("per_expert_scale"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
        for name, b in dec.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
        enc = model.model.encoder.language_model
        dec_params = dict(dec.named_parameters())
        for name, p in enc.named_parameters():
            if name not in dec_params:
                sys.exit(f"encoder parameter {name} has no decoder counterpart")
            p.copy_(dec_params[name])
        for name, b in enc.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
    model.tie_weights()
    with torch.no_grad():
        if not torch.equal(model.lm_head.weight, dec.embed_tokens.weight):
            model.lm_head.weight.copy_(dec.embed_tokens.weight)


def check_geometry(model):
    g = GEOM
    for i, layer in enumerate(model.model.decoder.layers):
        a = layer.self_attn
        full = LAYER_TYPES[i] == "full_attention"
        hd = g["global_head_dim"] if full else g["head_dim"]
        kv = g["global_kv_heads"] if full else g["kv_heads"]
        got = (a.q_proj.out_features, a.k_proj.out_features, a.v_proj is None)
        want = (g["heads"] * hd, kv * hd, full)
        if got != want:
            sys.exit(f"layer {i}: (q out, k out, no v) = {got}, want {want}: this transformers version "
                     "did not take global_head_dim / num_global_key_value_heads")


def mlx_state_dict(model):
    """The checkpoint in the MLX layout: §2.1's sanitize rules applied to the state dict."""
    out = {}
    for k, v in model.state_dict().items():
        if k == "lm_head.weight" or "rotary_emb" in k:
            continue
        if k.startswith("model.encoder.") and not k.startswith("model.encoder.language_model."):
            continue  # vision tower / embed_vision (none in this checkpoint)
        if k.startswith("model.encoder.language_model.") and not k.endswith(".layer_scalar"):
            continue
        if k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj"):
            k += ".weight"
        out[k] = v.detach().float().contiguous().clone()
    return out


class SharedLoRA:
    """y = base(x) + scale·(x·Aᵀ)·Bᵀ with one (A, B) per decoder-layer linear, installed on
    the decoder's and the encoder's copy of that linear alike."""

    def __init__(self, model):
        import torch

        gen = torch.Generator().manual_seed(SEED + 1)
        self.params = {}  # dgtune module name → (A [r, in], B [out, r])
        enc_layers = model.model.encoder.language_model.layers
        for i, layer in enumerate(model.model.decoder.layers):
            for key in LORA_KEYS:
                mod = _get(layer, key)
                if mod is None:
                    continue  # full layers have no v_proj
                fin, fout = mod.in_features, mod.out_features
                bound = 1 / math.sqrt(fin)
                a = torch.nn.Parameter((torch.rand(LORA_RANK, fin, generator=gen) * 2 - 1) * bound)
                b = torch.nn.Parameter(torch.randn(fout, LORA_RANK, generator=gen) * 0.05)
                self.params[f"model.decoder.layers.{i}.{key}"] = (a, b)
                for owner in (layer, enc_layers[i]):
                    _hook(_get(owner, key), a, b)

    def tensors(self):
        out = {}
        for name, (a, b) in self.params.items():
            out[name + ".lora_a"] = a.detach().t().contiguous()
            out[name + ".lora_b"] = b.detach().t().contiguous()
        return out

    def grads(self):
        out = {}
        for name, (a, b) in self.params.items():
            out["lora.grad." + name + ".lora_a"] = a.grad.detach().t().contiguous()
            out["lora.grad." + name + ".lora_b"] = b.grad.detach().t().contiguous()
        return out


def _get(owner, dotted):
    for part in dotted.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _hook(linear, a, b):
    def forward_hook(module, inputs, output):
        x = inputs[0]
        return output + LORA_SCALE * ((x @ a.t()) @ b.t())

    linear.register_forward_hook(forward_hook)


def softcap_logits(model, hidden):
    import torch

    z = model.lm_head(hidden).float()
    cap = model.config.text_config.final_logit_softcapping
    return torch.tanh(z / cap) * cap


def two_passes(model, prompt, canvas):
    import torch

    with torch.no_grad():
        first = model(input_ids=prompt, decoder_input_ids=canvas).logits
    second = model(input_ids=prompt, decoder_input_ids=canvas, self_conditioning_logits=first).logits
    return first, second


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", help="directory to write (created; existing files are replaced)")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import transformers
    from safetensors.torch import save_file

    torch.use_deterministic_algorithms(True)
    os.makedirs(os.path.join(args.outdir, "adapter"), exist_ok=True)
    model = build_model()
    randomize(model)
    check_geometry(model)
    for p in model.parameters():
        p.requires_grad_(False)

    save_file(mlx_state_dict(model), os.path.join(args.outdir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(args.outdir, "config.json"), "w") as f:
        json.dump(dgtune_config(), f, indent=2)
        f.write("\n")

    prompt = torch.tensor([PROMPT])
    canvas = torch.tensor([CANVAS])
    target = torch.tensor(TARGET)
    golden = {
        "prompt": torch.tensor(PROMPT, dtype=torch.int32),
        "canvas": torch.tensor(CANVAS, dtype=torch.int32),
        "target": torch.tensor(TARGET, dtype=torch.int32),
        "corrupt": torch.tensor(CORRUPT, dtype=torch.int32),
    }
    with torch.no_grad():
        first, second = two_passes(model, prompt, canvas)
    golden["logits_first"], golden["logits_sc"] = first, second

    lora = SharedLoRA(model)
    first, second = two_passes(model, prompt, canvas)
    denoise = F.cross_entropy(second[0], target)  # every canvas position (loss-positions all)
    seq = torch.tensor([PROMPT + TARGET])
    enc_hidden = model(input_ids=seq, decoder_input_ids=canvas).encoder_last_hidden_state
    enc_logits = softcap_logits(model, enc_hidden)
    encoder = F.cross_entropy(enc_logits[0, :-1], seq[0, 1:])
    loss = denoise + ENCODER_LOSS_WEIGHT * encoder
    loss.backward()
    golden["lora.logits_first"] = first.detach()
    golden["lora.logits_sc"] = second.detach()
    golden["lora.loss"] = loss.detach().reshape(1)
    golden["lora.encoder_loss"] = encoder.detach().reshape(1)
    golden.update(lora.grads())

    save_file(lora.tensors(), os.path.join(args.outdir, "adapter", "adapters.safetensors"), metadata={"format": "mlx"})
    with open(os.path.join(args.outdir, "adapter", "adapter_config.json"), "w") as f:
        json.dump({"fine_tune_type": "lora", "model_type": "diffusion_gemma", "num_layers": GEOM["layers"],
                   "lora_parameters": {"rank": LORA_RANK, "scale": LORA_SCALE, "dropout": 0.0, "keys": LORA_KEYS}},
                  f, indent=2)
        f.write("\n")
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "encoder_loss_weight": str(ENCODER_LOSS_WEIGHT), "loss_positions": "all"}
    save_file({k: v.float().contiguous() if v.is_floating_point() else v.contiguous() for k, v in golden.items()},
              os.path.join(args.outdir, "golden.safetensors"), metadata=meta)

    diff = (golden["logits_sc"] - golden["logits_first"]).abs().max().item()
    print(f"wrote {args.outdir}: transformers {transformers.__version__}, torch {torch.__version__}; "
          f"self-conditioning moves the logits by up to {diff:.3g}; lora loss {loss.item():.6f} "
          f"(encoder {encoder.item():.6f})")


if __name__ == "__main__":
    main()
