#!/usr/bin/env python3
"""transformers + PEFT peer of `probe bench`: one LoRA training step of DiffusionGemma.

transformers' own DiffusionGemmaForBlockDiffusion (float32, eager attention, the experts
implementation transformers picks unless --experts-implementation says otherwise), built from a
`probe mkmodel` checkpoint's config.json — the same geometry `probe bench` times — with random
weights (transformers' init; the values do not change the cost). PEFT LoRA (rank 8, lora_alpha 64
so that the scale alpha/r is dgtune's 8.0, dropout 0, task_type None) on q/k/v/o and the dense
gate/up/down of every language-model layer. transformers runs the encoder's layers as modules of
their own (sharing the decoder's weights), so PEFT adapts model.encoder.language_model.layers.N.*
and model.decoder.layers.N.* separately: twice dgtune's trainable parameters, the same work per
step. The step: t ~ U(0.4, 0.8), each canvas position replaced by a uniform random token with
probability t, cross-entropy over the corrupted positions of the softcapped logits, backward,
torch AdamW (lr 1e-4). One warm-up step, then --steps timed ones. It prints the JSON fields of
`probe bench --json`.

    python3 bench/peer_hf.py --model DIR --prompt-len 64 --canvas-len 64 --steps 3 --threads 16 --json

Needs torch, transformers >= 5.13 (DiffusionGemma), peft.
"""

import argparse
import json
import os
import re
import resource
import sys
import time

import torch
import torch.nn.functional as F

LORA_RE = r"model\.(encoder\.language_model|decoder)\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)"


def text_config_dict(cfg):
    """The text config as transformers reads the google checkpoint's (global_head_dim and
    num_global_key_value_heads included; transformers turns them into per-layer settings)."""
    t = dict(cfg.get("text_config", cfg))
    keep = ["vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "num_global_key_value_heads", "head_dim",
            "global_head_dim", "hidden_activation", "rms_norm_eps", "max_position_embeddings", "sliding_window",
            "layer_types", "rope_parameters", "final_logit_softcapping", "num_experts", "top_k_experts",
            "attention_bias", "attention_dropout", "use_bidirectional_attention", "pad_token_id", "eos_token_id",
            "bos_token_id", "tie_word_embeddings", "initializer_range"]
    return {k: t[k] for k in keep if k in t}


def make(cls, config, dtype):
    """The model of config with its weights made in dtype (transformers 5: _from_config(dtype=))."""
    try:
        return cls._from_config(config, dtype=dtype)
    except TypeError:  # a transformers that still names it torch_dtype
        return cls._from_config(config, torch_dtype=dtype)


def build(model_dir, experts_impl, attn_impl="eager", device="cpu", dtype=torch.float32):
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    path = model_dir if model_dir.endswith(".json") else os.path.join(model_dir, "config.json")
    cfg = json.load(open(path))
    kw = dict(text_config=text_config_dict(cfg), canvas_length=cfg.get("canvas_length", 256),
              tie_word_embeddings=True)
    for k in ("boi_token_id", "eoi_token_id", "image_token_id"):
        if k in cfg:
            kw[k] = cfg[k]
    config = DiffusionGemmaConfig(**kw)
    # The weights are made where they run, in their dtype: a 26B model initialised on the CPU in
    # float32 would take minutes and 100 GB before moving. transformers 5 builds a model in its
    # config's dtype (float32 unless told), whatever the default dtype; _from_config(dtype=...) is
    # how it makes one in bf16.
    def attempt(config, where):
        config._attn_implementation = attn_impl
        config.text_config._attn_implementation = attn_impl
        if experts_impl:
            config._experts_implementation = experts_impl
            config.text_config._experts_implementation = experts_impl
        config.dtype = dtype
        config.text_config.dtype = dtype
        with torch.device(where):
            return make(DiffusionGemmaForBlockDiffusion, config, dtype)

    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        # First on the meta device, which allocates nothing: transformers 5.17 cannot build the model
        # without a vision tower, and a failed build on the card stayed referenced by the exception
        # while the retry ran out of memory (bench/results/gpu-lease4.txt).
        try:
            attempt(config, "meta")
        except Exception as err:  # a release that always builds the vision tower
            from transformers import Gemma4VisionConfig
            print(f"peer_hf: no vision tower failed ({type(err).__name__}); using a 1-layer vision tower",
                  file=sys.stderr)
            kw["vision_config"] = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                     num_attention_heads=2, num_key_value_heads=2, head_dim=16)
            config = DiffusionGemmaConfig(**kw)
        model = attempt(config, device)
    finally:
        torch.set_default_dtype(prev)
    return model.to(device=device, dtype=dtype), config


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True,
                    help="probe mkmodel checkpoint directory (only config.json is read), or a config.json file")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--canvas-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--scale", type=float, default=8.0, help="LoRA scale; lora_alpha = scale·rank")
    ap.add_argument("--experts-implementation", default="", help="eager, batched_mm or grouped_mm (default: transformers')")
    ap.add_argument("--attn-implementation", default="eager", help="eager or sdpa")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                    help="base weights and activations (PEFT keeps LoRA weights in float32: autocast_adapter_dtype)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time --steps steps this many times in one process (with --sync: one round per go.N file)")
    ap.add_argument("--sync", default="",
                    help="directory: write ready once warm, then for N = 1..rounds wait for go.N, time a round, "
                         "print its JSON line and write done.N, so a driver can alternate rounds with another "
                         "program without re-importing torch and rebuilding the model each time")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    import peft
    import transformers
    from peft import LoraConfig, get_peft_model
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    cuda = args.device.startswith("cuda")
    model, config = build(args.model, args.experts_implementation, args.attn_implementation, args.device, dtype)
    lcfg = LoraConfig(r=args.rank, lora_alpha=args.scale * args.rank, lora_dropout=0.0, bias="none",
                      target_modules=LORA_RE, task_type=None)
    model = get_peft_model(model, lcfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    from peft.tuners.lora import LoraLayer
    n_adapted = sum(isinstance(m, LoraLayer) for m in model.modules())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    vocab = config.text_config.vocab_size

    gen = torch.Generator(device=args.device).manual_seed(2)
    prompt = torch.randint(0, vocab, (1, args.prompt_len), generator=gen, device=args.device)
    target = torch.randint(0, vocab, (1, args.canvas_len), generator=gen, device=args.device)

    def step():
        t = 0.4 + 0.4 * torch.rand((), generator=gen, device=args.device)
        mask = torch.rand(target.shape, generator=gen, device=args.device) < t
        if not mask.any():
            mask[..., 0] = True
        canvas = torch.where(mask, torch.randint(0, vocab, target.shape, generator=gen, device=args.device), target)
        out = model(input_ids=prompt, decoder_input_ids=canvas)
        loss = F.cross_entropy(out.logits.float()[mask], target[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss)

    step()  # warm-up
    if cuda:
        torch.cuda.synchronize()
    if args.sync:
        open(os.path.join(args.sync, "ready"), "w").close()
    for n in range(1, args.rounds + 1):
        if args.sync:
            while not os.path.exists(os.path.join(args.sync, "go.%d" % n)):
                time.sleep(0.02)
        timed(args, config, params, n_adapted, step, cuda)
        if args.sync:
            open(os.path.join(args.sync, "done.%d" % n), "w").close()


def timed(args, config, params, n_adapted, step, cuda):
    """Times --steps steps and prints the result (one JSON line with --json)."""
    import peft
    import transformers
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()  # float(loss) already waited for the last step; this is belt and braces
    el = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    impl = getattr(config, "_experts_implementation", None) or getattr(config.text_config, "_experts_implementation", None)
    res = {
        "tokens_per_sec": (args.prompt_len + args.canvas_len) * args.steps / el,
        "ms_per_step": 1000 * el / args.steps,
        "peak_rss_bytes": r1.ru_maxrss * 1024,
        "trainable_params": sum(p.numel() for p in params),
        "backend": "transformers+peft",
        "prompt_len": args.prompt_len, "canvas_len": args.canvas_len, "steps": args.steps, "rank": args.rank,
        "threads": args.threads, "cpu_ms_per_step": 1000 * cpu / args.steps,
        "adapted_linears": n_adapted, "experts_implementation": impl,
        "attn_implementation": args.attn_implementation, "device": args.device, "dtype": args.dtype,
        "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
    }
    if cuda:
        res["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()  # timed steps only (reset after warm-up)
        res["gpu"] = torch.cuda.get_device_name()
    if args.json:
        print(json.dumps(res), flush=True)
    else:
        print(f"transformers+peft: {res['tokens_per_sec']:.1f} tokens/s, {res['ms_per_step']:.1f} ms/step, "
              f"peak RSS {res['peak_rss_bytes'] >> 20} MiB, {res['trainable_params']} trainable")


if __name__ == "__main__":
    sys.exit(main())
