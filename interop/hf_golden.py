#!/usr/bin/env python3
"""Golden data from Hugging Face transformers + PEFT for dgtune's interop tests.

Builds small random DiffusionGemma models with transformers' own
DiffusionGemmaForBlockDiffusion, saves them with save_pretrained (f32 sharded, bf16, f16),
makes PEFT LoRA adapters (decoder-only keys, encoder+decoder with equal values, encoder+decoder
independent), and writes reference logits, losses and LoRA gradients computed by
transformers + PEFT. The Go tests in interop/ (run by `go test ./...`, no Python needed)
compare dgtune against these numbers.

Usage (where torch, transformers >= 5.13, peft and safetensors are installed):

    python3 interop/hf_golden.py OUTDIR

OUTDIR then holds what interop/testdata/hf/ commits (small: well under 2 MB).
Everything is seeded: the same versions give the same bytes.
"""

import json
import os
import sys
import traceback

import torch

LOG = []


def log(*a):
    s = " ".join(str(x) for x in a)
    LOG.append(s)
    print(s, flush=True)


def randomize(model, gen):
    """Give every weight a non-trivial random value (transformers' init leaves norms at 1,
    scalars at 1, and linears tiny), so that the golden numbers exercise every tensor."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)
            elif name.endswith("per_expert_scale"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            else:  # norm weights, router.scale
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
        # The embedding doubles as the head: a larger spread gives peakier logits.
        emb = model.get_input_embeddings().weight
        emb.copy_(torch.randn(emb.shape, generator=gen))


def text_config(sliding_window=8):
    return dict(
        vocab_size=256,
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        global_head_dim=16,
        num_global_key_value_heads=1,
        sliding_window=sliding_window,
        num_experts=4,
        top_k_experts=2,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=1024,
        use_bidirectional_attention="vision",
        final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh",
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
        },
    )


# transformers always builds a vision tower (vision_config None is refused), so every model
# here has a tiny one, and image token ids inside the small vocabulary.
VISION = dict(
    model_type="gemma4_vision",
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=16,
    patch_size=16,
    pooling_kernel_size=3,
    position_embedding_size=64,
    standardize=True,
    use_clipped_linears=False,
)
IMAGE_IDS = dict(boi_token_id=250, eoi_token_id=251, image_token_id=252)


def build(cfg_kwargs, seed):
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    cfg = DiffusionGemmaConfig(**cfg_kwargs)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(cfg).eval()
    model.config._attn_implementation = "eager"
    randomize(model, torch.Generator().manual_seed(seed))
    model.tie_weights()
    return model


def ids(gen, n, vocab):
    return torch.randint(0, vocab, (1, n), generator=gen)


def lora_regex(layers, parts):
    # PEFT full-matches a string target_modules against every module name.
    return r"^model\.(?:%s)\.layers\.(?:%s)\.(?:self_attn\.(?:q_proj|k_proj|v_proj|o_proj)|mlp\.(?:gate_proj|up_proj|down_proj))$" % (
        "|".join(parts),
        "|".join(str(i) for i in range(layers)),
    )


def peft_name(n):
    """Parameter name in the PEFT model -> tensor name in adapter_model.safetensors."""
    return n.replace(".default", "")


def denoising_loss(logits, target, corrupt):
    ce = torch.logsumexp(logits, -1) - logits.gather(-1, target[..., None])[..., 0]
    w = corrupt.float()
    return (ce * w).sum() / w.sum().clamp(min=1)


def main(out):
    import peft
    import safetensors
    import transformers
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file

    os.makedirs(out, exist_ok=True)
    meta = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "safetensors": safetensors.__version__,
    }
    log("versions", meta)
    torch.set_num_threads(4)
    ref = {}

    # ---- the text model -------------------------------------------------------------------
    model = build(dict(text_config=text_config(), vision_config=dict(VISION), canvas_length=16, **IMAGE_IDS), seed=1)
    vocab = 256
    sd = model.state_dict()
    meta["state_dict"] = {k: list(v.shape) for k, v in sd.items()}
    meta["modules"] = [n for n, _ in model.named_modules()]
    meta["buffers"] = [n for n, _ in model.named_buffers()]

    model.save_pretrained(os.path.join(out, "text-f32"), max_shard_size="100KB")
    import copy

    import safetensors

    for dt, name in [(torch.bfloat16, "text-bf16"), (torch.float16, "text-f16")]:
        m2 = copy.deepcopy(model).to(dt)
        m2.save_pretrained(os.path.join(out, name))
        # The reference for a half-precision checkpoint: transformers in f32 on the rounded weights.
        m3 = m2.to(torch.float32).eval()
        # Buffers save_pretrained does not write (embed_scale, rotary inv_freq) are derived
        # from the config when a checkpoint loads, in f32: undo their rounding.
        stored = set()
        for f in os.listdir(os.path.join(out, "text-f32")):
            if f.endswith(".safetensors"):
                stored |= set(safetensors.safe_open(os.path.join(out, "text-f32", f), "pt").keys())
        orig = dict(model.named_buffers())
        with torch.no_grad():
            for bn, b in m3.named_buffers():
                if bn not in stored:
                    b.copy_(orig[bn])
        g = torch.Generator().manual_seed(7)
        prompt, canvas = ids(g, 6, vocab), ids(g, 10, vocab)
        with torch.no_grad():
            ref[name + ".logits"] = m3(input_ids=prompt, decoder_input_ids=canvas).logits.float().contiguous()
        ref[name + ".prompt"], ref[name + ".canvas"] = prompt.int(), canvas.int()
        del m2, m3
    for d in ["text-f32", "text-bf16", "text-f16"]:
        meta[d + ".files"] = sorted(os.listdir(os.path.join(out, d)))
        with open(os.path.join(out, d, "config.json")) as f:
            meta[d + ".config"] = json.load(f)
    log("saved", {d: meta[d + ".files"] for d in ["text-f32", "text-bf16", "text-f16"]})

    g = torch.Generator().manual_seed(3)
    # short: prompt 6 <= sliding_window - 1, where transformers' training forward (encoder K/V
    # passed as tensors, no window on the decoder) and its generation forward (a cache) agree.
    prompt, canvas = ids(g, 6, vocab), ids(g, 10, vocab)
    target = ids(g, 10, vocab)
    corrupt = torch.rand((1, 10), generator=g) < 0.6
    canvas = torch.where(corrupt, canvas, target)
    ref["short.prompt"], ref["short.canvas"] = prompt.int(), canvas.int()
    ref["short.target"], ref["short.corrupt"] = target.int(), corrupt.int()
    with torch.no_grad():
        ref["base.short.logits"] = model(input_ids=prompt, decoder_input_ids=canvas).logits.contiguous()
        ref["base.short.loss"] = denoising_loss(ref["base.short.logits"], target, corrupt).reshape(1)

    # long: prompt 12 > sliding_window. With a cache (generation) the canvas sees the last
    # window-1 encoder positions on sliding layers, as in mlx-vlm; without one (training)
    # transformers lets it see all of them.
    long_prompt = ids(g, 12, vocab)
    ref["long.prompt"] = long_prompt.int()
    with torch.no_grad():
        ref["base.long.nocache.logits"] = model(input_ids=long_prompt, decoder_input_ids=canvas).logits.contiguous()
        try:
            from transformers import DynamicCache

            try:
                cache = DynamicCache(config=model.config.get_text_config())
            except TypeError:
                cache = DynamicCache()
            ref["base.long.cache.logits"] = model(
                input_ids=long_prompt, decoder_input_ids=canvas, past_key_values=cache, use_cache=True
            ).logits.contiguous()
        except Exception:
            log("long prompt with cache failed:", traceback.format_exc())

    # ---- PEFT adapters ------------------------------------------------------------------------
    layers = 3
    variants = {
        "peft-decoder": ["decoder"],
        "peft-equal": ["decoder", r"encoder\.language_model"],
        "peft-separate": ["decoder", r"encoder\.language_model"],
    }
    for vname, parts in variants.items():
        try:
            base = build(dict(text_config=text_config(), vision_config=dict(VISION), canvas_length=16, **IMAGE_IDS), seed=1)
            lcfg = LoraConfig(r=4, lora_alpha=12, lora_dropout=0.0, target_modules=lora_regex(layers, parts),
                              bias="none", task_type=None)
            pm = get_peft_model(base, lcfg)
            gl = torch.Generator().manual_seed(11)
            with torch.no_grad():
                named = dict(pm.named_parameters())
                for n, p in named.items():
                    if "lora_" in n:
                        p.copy_(0.2 * torch.randn(p.shape, generator=gl))
                if vname == "peft-equal":
                    for n, p in named.items():
                        if "lora_" in n and ".encoder.language_model." in n:
                            p.copy_(named[n.replace("encoder.language_model.", "decoder.")])
            pm.eval()
            for n, p in pm.named_parameters():
                p.requires_grad_("lora_" in n)
            out_ = pm(input_ids=prompt, decoder_input_ids=canvas)
            loss = denoising_loss(out_.logits, target, corrupt)
            loss.backward()
            ref[vname + ".logits"] = out_.logits.detach().contiguous()
            ref[vname + ".loss"] = loss.detach().reshape(1)
            for n, p in pm.named_parameters():
                if "lora_" in n:
                    # The encoder's last layer reaches the loss only through its k/v projections:
                    # its other LoRA tensors get no gradient at all (None), i.e. zero.
                    gr = p.grad if p.grad is not None else torch.zeros_like(p)
                    ref[vname + ".grad." + peft_name(n)] = gr.detach().contiguous()
            pm.save_pretrained(os.path.join(out, vname))
            with open(os.path.join(out, vname, "adapter_config.json")) as f:
                meta[vname + ".adapter_config"] = json.load(f)
            meta[vname + ".tensors"] = sorted(
                safetensors.safe_open(os.path.join(out, vname, "adapter_model.safetensors"), "pt").keys()
            )
            log(vname, "loss", float(loss.detach()), "tensors", len(meta[vname + ".tensors"]))
        except Exception:
            log(vname, "failed:", traceback.format_exc())

    # ---- an image prompt through transformers' Gemma 4 vision tower -----------------------------
    try:
        vision(out, ref, meta)
    except Exception:
        log("vision failed:", traceback.format_exc())

    ref = {k: v.contiguous() for k, v in ref.items()}
    save_file(ref, os.path.join(out, "reference.safetensors"))
    meta["log"] = LOG
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def vision(out, ref, meta):
    import numpy as np
    from PIL import Image
    from transformers import Gemma4ImageProcessor

    vcfg = dict(VISION)
    # A window longer than the prompt: every attention path of transformers agrees then.
    model = build(
        dict(text_config=text_config(sliding_window=128), vision_config=vcfg, canvas_length=16,
             vision_soft_tokens_per_image=70, **IMAGE_IDS),
        seed=5,
    )
    model.save_pretrained(os.path.join(out, "vision-f32"))
    with open(os.path.join(out, "vision-f32", "config.json")) as f:
        meta["vision-f32.config"] = json.load(f)
    meta["vision-f32.files"] = sorted(os.listdir(os.path.join(out, "vision-f32")))

    # 384x384 with 70 soft tokens (630 patches) needs no resize: 24x24 patches -> 64 soft tokens.
    g = np.random.default_rng(9)
    yy, xx = np.mgrid[0:384, 0:384]
    img = np.stack([(xx * 255 // 383), (yy * 255 // 383), ((xx + yy) * 255 // 766)], -1)
    img = (img + g.integers(0, 3, img.shape)).clip(0, 255).astype(np.uint8)
    Image.fromarray(img).save(os.path.join(out, "vision-f32", "image.png"))
    proc = Gemma4ImageProcessor(max_soft_tokens=70)
    feats = proc(images=Image.open(os.path.join(out, "vision-f32", "image.png")), return_tensors="pt")
    n_soft = int(feats["num_soft_tokens_per_image"][0])
    log("vision soft tokens", n_soft, "pixel_values", list(feats["pixel_values"].shape))
    ref["vision.pixel_values.head"] = feats["pixel_values"][0, :4].float().contiguous()  # the whole is 1.9 MB
    ref["vision.image_position_ids"] = feats["image_position_ids"].int()
    cfg = model.config
    with torch.no_grad():
        vf = model.model.encoder.get_image_features(feats["pixel_values"], feats["image_position_ids"], return_dict=True)
        ref["vision.features"] = vf.pooler_output.float().reshape(-1, cfg.text_config.hidden_size).contiguous()
    gen = torch.Generator().manual_seed(13)
    pre, post = ids(gen, 3, 256), ids(gen, 4, 256)
    img_ids = torch.tensor([[cfg.boi_token_id] + [cfg.image_token_id] * n_soft + [cfg.eoi_token_id]])
    prompt = torch.cat([pre, img_ids, post], 1)
    mm = (prompt == cfg.image_token_id).long()
    canvas = ids(gen, 8, 256)
    ref["vision.prompt"], ref["vision.canvas"] = prompt.int(), canvas.int()
    kw = dict(input_ids=prompt, decoder_input_ids=canvas, pixel_values=feats["pixel_values"],
              image_position_ids=feats["image_position_ids"], mm_token_type_ids=mm)
    with torch.no_grad():
        # As transformers runs it by default. In 5.17 DiffusionGemmaEncoderModel.forward builds
        # the vision-bidirectional masks but does not use them (the result of
        # create_masks_for_generate is dropped), so image tokens attend causally here.
        ref["vision.logits.default"] = model(**kw).logits.contiguous()
        # With the masks it builds passed in explicitly: image tokens of one block see each
        # other (use_bidirectional_attention "vision"), as mlx-vlm and dgtune do.
        enc = model.model.encoder
        dummy = torch.zeros(1, prompt.shape[1], cfg.text_config.hidden_size)
        masks = enc.create_masks_for_generate(
            config=cfg.get_text_config(), inputs_embeds=dummy, attention_mask=None, past_key_values=None,
            position_ids=torch.arange(prompt.shape[1])[None], mm_token_type_ids=mm)
        meta["vision.mask_kinds"] = sorted(masks.keys()) if isinstance(masks, dict) else str(type(masks))
        ref["vision.logits"] = model(**kw, attention_mask=masks).logits.contiguous()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: hf_golden.py OUTDIR")
    main(sys.argv[1])
