#!/usr/bin/env python3
"""Golden numbers from NeMo AutoModel's own code (commit 36044ad) for dgtune's `recipe: nemo`.

NeMo's modules are imported file by file from a copy of its source tree (--nemo DIR, holding at
least the files in NEMO_FILES at their repository paths, without the packages' __init__.py):
the package's own imports pull in the whole training stack (FSDP, MoE kernels, loggers), so
every NeMo module this script does not read is replaced by an empty stand-in, and so are the
loggers (mlflow, wandb), torchao and `datasets` when they are not installed. Nothing of NeMo is
reimplemented here: the numbers are what its functions return.

It writes one JSON file (--out) with:

  chat        NeMo's ChatDataset (seq_length, truncation, mask_history, unshifted, the recipe's
              chat template) and DLLMCollator (response window, EOS block fill) on the rows of
              --rows with the demo base's tokenizer: input_ids, loss_mask, attention_mask per row
              (a batch of one each) and for all rows in one batch.
  lr          the learning rate torch's AdamW steps with at each of the 800 steps of
              diffusion_gemma_lora.yaml's schedule (LRSchedulerConfig.build, stepped as the recipe
              steps it: optimizer.step, then scheduler.step(1)).
  adamw       torch.optim.AdamW with the recipe's betas/eps/decay over a few fixed gradients.
  xavier      NeMo's LinearLoRA initialisation (lora_A_init "xavier", dim 16, alpha 32): the
              statistics of A for a few linear shapes, B's largest magnitude.
  reduction   one step of 2 ranks × 2 micro-batches × local batch 1 on four chat rows, with
              synthetic logits (a formula of example, position and vocabulary index, which the
              Go test evaluates the same way): NeMo's corruption (its per-sample seeds), response
              window, loss denominators (_compute_loss_denominators, summed over the ranks as
              its all-reduce does), BlockDiffusionCrossEntropyLoss and encoder_ar_loss — each
              micro-batch's loss and the step's total.
  transformers the same step on the demo base loaded into transformers' DiffusionGemma: each
              example's decoder CE sum (two passes where NeMo's self-conditioning coin says so)
              and encoder CE sum, and NeMo's loss terms from them.

Usage (torch ≥ 2.4, transformers ≥ 5.13 with DiffusionGemma, safetensors; CPU is enough):
    python3 interop/nemo_golden.py --nemo DIR --out nemo_golden.json
"""

import argparse
import importlib
import importlib.abc
import importlib.util
import json
import math
import os
import sys
import traceback
import types
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

NEMO_FILES = [
    "nemo_automodel/components/datasets/llm/formatting_utils.py",
    "nemo_automodel/components/datasets/llm/chat_dataset.py",
    "nemo_automodel/components/datasets/dllm/collate.py",
    "nemo_automodel/components/datasets/dllm/corruption.py",
    "nemo_automodel/components/loss/dllm_loss.py",
    "nemo_automodel/components/optim/scheduler.py",
    "nemo_automodel/components/optim/optimizer.py",
    "nemo_automodel/components/_peft/lora.py",
    "nemo_automodel/shared/import_utils.py",
    "nemo_automodel/recipes/dllm/train_ft.py",
    "nemo_automodel/recipes/dllm/strategy.py",
    "nemo_automodel/components/models/diffusion_gemma/attention_mask.py",
    "examples/dllm_sft/diffusion_gemma_chat_template.jinja",
]

# The demo's geometry for the golden step: its canvas (16) stands for NeMo's 256-token canvas
# and block, 64 for NeMo's seq_length 1024.
BLOCK = 16
SEQ_LENGTH = 64
VOCAB = 512
STEP = 3  # the optimizer step the reduction's seeds are drawn for
SEED = 42
EPS = 0.001
SELF_COND_P = 0.5
ENCODER_LOSS_WEIGHT = 1.0
# (rank, micro-batch) → row of --rows: dgtune's micro-batch m of a global batch of 2 holds
# examples 2m (rank 0) and 2m+1 (rank 1), as NeMo's strided sampler deals them.
STEP_ROWS = {(0, 0): 0, (1, 0): 1, (0, 1): 5, (1, 1): 6}


# ---------------------------------------------------------------------------------------------
# Importing NeMo file by file


class _Stub(types.ModuleType):
    """A stand-in module: every attribute is an inert class of that name."""

    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self._made = {}

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr not in self._made:
            self._made[attr] = type(attr, (), {"__init__": lambda self, *a, **k: None})
        return self._made[attr]


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return _Stub(spec.name)

    def exec_module(self, module):
        pass


class _StubFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: modules under the given roots that nothing else found."""

    def __init__(self, roots):
        self.roots = roots
        self.stubbed = []

    def find_spec(self, name, path, target=None):
        if any(name == r or name.startswith(r + ".") for r in self.roots):
            self.stubbed.append(name)
            return importlib.util.spec_from_loader(name, _StubLoader())
        return None


def install_nemo(nemo_dir):
    missing = [f for f in NEMO_FILES if not os.path.exists(os.path.join(nemo_dir, f))]
    if missing:
        sys.exit(f"--nemo {nemo_dir}: missing {missing}")
    for f in NEMO_FILES:
        d = os.path.dirname(os.path.join(nemo_dir, f))
        while d != nemo_dir:
            if os.path.exists(os.path.join(d, "__init__.py")):
                sys.exit(f"--nemo {nemo_dir}: {d}/__init__.py would import NeMo's whole stack: copy the files alone")
            d = os.path.dirname(d)
    sys.path.insert(0, nemo_dir)
    roots = ["nemo_automodel"]
    for opt in ("mlflow", "wandb", "torchao", "datasets"):
        if importlib.util.find_spec(opt) is None:
            roots.append(opt)
    finder = _StubFinder(roots)
    sys.meta_path.append(finder)
    # The import helper NeMo's LoRA module calls at import time answers "not installed" for
    # optional kernels; a stand-in would claim Transformer Engine is there.
    return finder


def section(results, name, fn, *args):
    try:
        results[name] = fn(*args)
        print(f"{name}: ok", flush=True)
    except Exception:
        results[name] = {"error": traceback.format_exc()}
        print(f"{name}: FAILED\n{results[name]['error']}", flush=True)


def tolist(t):
    return t.detach().cpu().tolist()


# ---------------------------------------------------------------------------------------------
# chat: ChatDataset + DLLMCollator


def load_tokenizer(model_dir):
    import transformers

    cls = getattr(transformers, "PreTrainedTokenizerFast", None) or getattr(transformers, "TokenizersBackend")
    # The demo base ships tokenizer.json only; its special tokens as Gemma's tokenizer_config names them.
    return cls(tokenizer_file=os.path.join(model_dir, "tokenizer.json"), bos_token="<bos>", eos_token="<eos>",
               pad_token="<pad>", unk_token="<unk>")


def nemo_dataset(nemo_dir, tok, rows):
    from nemo_automodel.components.datasets.llm.chat_dataset import ChatDataset

    # diffusion_gemma_lora.yaml's dataset block, with the demo's seq_length.
    return ChatDataset(rows, tok, split="train", seq_length=SEQ_LENGTH, truncation=True, unshifted=True,
                       mask_history=True,
                       chat_template=os.path.join(nemo_dir, "examples/dllm_sft/diffusion_gemma_chat_template.jinja"))


def nemo_collator(tok):
    from nemo_automodel.components.datasets.dllm.collate import DLLMCollator

    # DiffusionLMSFTRecipe._wrap_dataloader_collate with the recipe's dllm block
    # (pad_block_size = pad_seq_len_divisible = the block) and DiffusionGemma's response window.
    return DLLMCollator(pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, block_size=BLOCK,
                        pad_seq_len_divisible=BLOCK, max_seq_len=SEQ_LENGTH, supervise_padding=False,
                        response_window=True)


def chat(nemo_dir, model_dir, rows):
    import copy

    tok = load_tokenizer(model_dir)
    ds = nemo_dataset(nemo_dir, tok, rows)
    coll = nemo_collator(tok)
    out = {"seq_length": SEQ_LENGTH, "block": BLOCK, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id,
           "dataset_pad_token_id": ds.pad_token_id, "rows": []}
    samples = [ds[i] for i in range(len(ds))]
    for i, s in enumerate(samples):
        b = coll([copy.deepcopy(s)])
        rendered = tok.apply_chat_template(ds.dataset[i]["messages"], tokenize=False)
        out["rows"].append({
            "rendered": rendered,
            "sample": {k: s[k] for k in ("input_ids", "loss_mask", "attention_mask")},
            "input_ids": tolist(b["input_ids"][0]), "loss_mask": [int(x) for x in tolist(b["loss_mask"][0])],
            "attention_mask": tolist(b["attention_mask"][0]), "input_length": int(b["input_lengths"][0]),
        })
    b = coll([copy.deepcopy(s) for s in samples])
    out["batch"] = {"input_ids": tolist(b["input_ids"]), "loss_mask": [[int(x) for x in r] for r in tolist(b["loss_mask"])],
                    "attention_mask": tolist(b["attention_mask"])}
    return out


# ---------------------------------------------------------------------------------------------
# lr, adamw


def recipe_optimizer(params):
    import torch

    # diffusion_gemma_lora.yaml: optimizer block.
    return torch.optim.AdamW(params, lr=1.5e-4, betas=(0.95, 0.99), eps=1e-8, weight_decay=1e-4)


def lr():
    import torch

    p = torch.nn.Parameter(torch.zeros(3))
    opt = recipe_optimizer([p])
    how = "LRSchedulerConfig.build"
    try:
        from nemo_automodel.components.optim.optimizer import LRSchedulerConfig

        # lr_scheduler block; total steps from step_scheduler (max_steps 800 < one epoch of ~934).
        sched = LRSchedulerConfig(lr_warmup_steps=25, init_lr=0.0, lr_decay_style="cosine", min_lr=1.5e-5).build(
            opt, SimpleNamespace(epoch_len=934, num_epochs=1, max_steps=800))[0]
    except Exception:
        from nemo_automodel.components.optim.scheduler import OptimizerParamScheduler

        how = "OptimizerParamScheduler (LRSchedulerConfig failed: " + traceback.format_exc().splitlines()[-1] + ")"
        sched = OptimizerParamScheduler(opt, init_lr=0.0, max_lr=1.5e-4, min_lr=1.5e-5, lr_warmup_steps=25,
                                        lr_decay_steps=800, lr_decay_style="cosine", start_wd=1e-4, end_wd=1e-4,
                                        wd_incr_steps=800, wd_incr_style="constant")
    lrs, wds = [], []
    for _ in range(800):
        lrs.append(float(opt.param_groups[0]["lr"]))
        wds.append(float(opt.param_groups[0]["weight_decay"]))
        p.grad = torch.ones(3)
        opt.step()
        opt.zero_grad()
        sched.step(1)
    return {"built_by": how, "lr": lrs, "weight_decay": wds, "warmup_steps": sched.lr_warmup_steps,
            "decay_steps": sched.lr_decay_steps, "min_lr": sched.min_lr, "max_lr": sched.max_lr, "init_lr": sched.init_lr}


def adamw():
    import torch

    p = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.float32))
    opt = recipe_optimizer([p])
    for g in opt.param_groups:
        g["lr"] = 1e-2  # visible steps
    grads = [[0.1, -0.2, 0.3, 0.0], [0.05, 0.4, -0.1, 1.0], [-0.3, 0.1, 0.2, -0.5]]
    steps = []
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        steps.append(tolist(p))
    return {"init": [0.5, -1.0, 2.0, 0.0], "lr": 1e-2, "betas": [0.95, 0.99], "eps": 1e-8, "weight_decay": 1e-4,
            "grads": grads, "params": steps}


# ---------------------------------------------------------------------------------------------
# xavier


def xavier():
    import torch

    from nemo_automodel.components._peft.lora import LinearLoRA

    torch.manual_seed(SEED)
    out = []
    # The demo base's adapted linears, and two of the 26B geometry (hidden 2816).
    for fin, fout in [(64, 64), (64, 32), (64, 128), (128, 64), (2816, 4096), (2112, 2816)]:
        lin = torch.nn.Linear(fin, fout, bias=False)
        lora = LinearLoRA(lin, dim=16, alpha=32, lora_A_init_method="xavier")
        a = lora.lora_A.weight.detach().double()
        out.append({"in": fin, "out": fout, "rank": 16, "scale": float(lora.scale), "n": a.numel(),
                    "mean": a.mean().item(), "std": a.std(unbiased=False).item(),
                    "expected_std": math.sqrt(2.0 / (fin + 16)), "max_abs": a.abs().max().item(),
                    "b_max_abs": lora.lora_B.weight.detach().abs().max().item(),
                    "a_shape": list(lora.lora_A.weight.shape)})
    return out


# ---------------------------------------------------------------------------------------------
# reduction: one step of NeMo's losses


def enc_logit(k, i, v):
    """Synthetic encoder logit of example row k at sequence position i, vocabulary index v."""
    return ((k * 131 + i * 37 + v * 17) % 101) / 101.0 * 8.0 - 4.0


def dec_logit(k, j, v):
    """Synthetic decoder logit of example row k at canvas position j, vocabulary index v."""
    return ((k * 71 + j * 43 + v * 29) % 103) / 103.0 * 6.0 - 3.0


def synthetic(fn, k, n):
    import torch

    return torch.tensor([[[fn(k, i, v) for v in range(VOCAB)] for i in range(n)]], dtype=torch.float64).float()


class _Ranks:
    """Pretends to be rank `rank` of `size` data-parallel ranks while NeMo seeds its draws."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def __enter__(self):
        import torch

        self.saved = torch.distributed.is_initialized
        torch.distributed.is_initialized = lambda: True
        return self

    def __exit__(self, *exc):
        import torch

        torch.distributed.is_initialized = self.saved


def nemo_recipe(rank, size):
    import torch

    from nemo_automodel.recipes.dllm.strategy import BlockDiffusionStrategy
    from nemo_automodel.recipes.dllm.train_ft import DiffusionGemmaSFTRecipe

    r = object.__new__(DiffusionGemmaSFTRecipe)
    r.dist_env = SimpleNamespace(device=torch.device("cpu"))
    r.step_scheduler = SimpleNamespace(step=STEP, grad_acc_steps=2, epoch=0)
    r._self_cond_base_seed = SEED
    r.dllm_strategy = BlockDiffusionStrategy()
    r.dllm_loss_fn = r.dllm_strategy.create_loss_fn({"vocab_size": VOCAB})
    r.dllm_eps = EPS
    r.dllm_block_size = BLOCK
    r.dllm_half_life_ratio = 0.25
    r.mask_token_id = 0
    r.canvas_length = BLOCK
    r.block_diffusion_sliding_window = 64
    r.distributed_config = SimpleNamespace(autocast_dtype=None)
    r.self_conditioning_p = SELF_COND_P
    r._encoder_loss_weight = ENCODER_LOSS_WEIGHT
    r._get_dp_rank = lambda: rank
    r._get_dp_group_size = lambda include_cp=False: size
    r._dp_allreduce = lambda t, include_cp=False: t  # one rank's count; the caller sums the ranks
    return r


def nemo_step(nemo_dir, model_dir, rows):
    """NeMo's pre_step and loss denominators for the step's four rows, per rank."""
    import copy

    tok = load_tokenizer(model_dir)
    ds = nemo_dataset(nemo_dir, tok, rows)
    coll = nemo_collator(tok)
    ranks = {}
    for rank in (0, 1):
        recipe = nemo_recipe(rank, 2)
        batches = [coll([copy.deepcopy(ds[STEP_ROWS[(rank, m)]])]) for m in (0, 1)]
        with _Ranks(rank, 2):
            recipe.dllm_strategy.pre_step(recipe, batches)
            n_diff, n_ar = recipe._compute_loss_denominators(batches, 0, 0)
        coins = [bool(recipe._decide_self_conditioning(1, m)[0]) for m in (0, 1)]
        ranks[rank] = {"recipe": recipe, "batches": batches, "n_diff": n_diff, "n_ar": n_ar, "coins": coins}
    return ranks


def example_record(rank, m, batch, coin):
    w = batch["_window"]
    attn = batch["attention_mask"][0]
    eff = int(attn.sum())
    prefix = int(batch["loss_mask"][0].nonzero()[0])
    return {
        "rank": rank, "micro_batch": m, "row": STEP_ROWS[(rank, m)], "prefix": prefix, "length": eff,
        "clean": tolist(batch["_clean_input_ids"][0][:eff]),
        "noisy": tolist(batch["_noisy_input_ids"][0][:eff]),
        "noise_mask": [int(x) for x in tolist(batch["_noise_mask"][0][:eff])],
        "canvas_ids": tolist(w["canvas_ids"][0]), "target_ids": tolist(w["target_ids"][0]),
        "canvas_loss_mask": [int(x) for x in tolist(w["loss_mask"][0])], "self_conditioning": coin,
        # The canvas NeMo's one-canvas selection scores (_build_response_window's sel_block).
        "block": int(w["loss_mask"][0].nonzero()[0]) // BLOCK,
    }


def reduction(nemo_dir, model_dir, rows):
    from nemo_automodel.components.loss.dllm_loss import encoder_ar_loss

    ranks = nemo_step(nemo_dir, model_dir, rows)
    n_diff = sum(r["n_diff"] for r in ranks.values())
    n_ar = sum(r["n_ar"] for r in ranks.values())
    examples, total = [], 0.0
    for rank, r in ranks.items():
        for m, batch in enumerate(r["batches"]):
            w = batch["_window"]
            k = STEP_ROWS[(rank, m)]
            seq_len = batch["input_ids"].shape[1]
            logits = synthetic(dec_logit, k, w["canvas_ids"].shape[1])
            diff = r["recipe"].dllm_loss_fn(logits=logits, target_ids=w["target_ids"], noise_mask=w["noise_mask"],
                                            p_mask=w["p_mask"], loss_mask=w["loss_mask"], num_diffusion_tokens=n_diff).total_loss
            enc = encoder_ar_loss(synthetic(enc_logit, k, seq_len), batch["_clean_input_ids"],
                                  valid_mask=batch["attention_mask"].bool(), num_tokens=n_ar)
            loss = diff + ENCODER_LOSS_WEIGHT * enc
            total += loss.item()
            ex = example_record(rank, m, batch, r["coins"][m])
            ex.update({"diffusion_loss": diff.item(), "encoder_loss": enc.item(), "loss": loss.item()})
            examples.append(ex)
    return {"step": STEP, "seed": SEED, "eps": EPS, "block": BLOCK, "vocab": VOCAB, "num_diffusion_tokens": n_diff,
            "num_ar_tokens": n_ar, "per_rank_denominators": {str(k): [v["n_diff"], v["n_ar"]] for k, v in ranks.items()},
            "examples": examples, "total_loss": total}


# ---------------------------------------------------------------------------------------------
# transformers: the demo base in DiffusionGemma, NeMo's losses on its logits

VISION = dict(model_type="gemma4_vision", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=2, num_key_value_heads=2, head_dim=16, patch_size=16, pooling_kernel_size=3,
              position_embedding_size=64, standardize=True, use_clipped_linears=False)


def demo_model(model_dir):
    import torch
    from safetensors.torch import load_file
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    t = cfg["text_config"]
    text = {k: t[k] for k in (
        "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "global_head_dim", "num_global_key_value_heads",
        "hidden_activation", "max_position_embeddings", "rms_norm_eps", "sliding_window", "layer_types",
        "rope_parameters", "num_experts", "top_k_experts", "use_bidirectional_attention", "final_logit_softcapping",
        "pad_token_id", "eos_token_id", "bos_token_id")}
    hf = DiffusionGemmaConfig(text_config=text, vision_config=dict(VISION), canvas_length=cfg["canvas_length"],
                              boi_token_id=cfg["boi_token_id"], eoi_token_id=cfg["eoi_token_id"],
                              image_token_id=cfg["image_token_id"])
    hf._attn_implementation = "eager"
    model = DiffusionGemmaForBlockDiffusion(hf).eval().float()
    model.config._attn_implementation = "eager"
    weights = load_file(os.path.join(model_dir, "model.safetensors"))
    used, loaded, skipped = set(), [], []
    sd = model.state_dict()
    with torch.no_grad():
        for name, dst in sd.items():
            src = name
            if name == "lm_head.weight":
                src = "model.decoder.embed_tokens.weight"
            elif name.startswith("model.encoder.language_model.") and not name.endswith(".layer_scalar"):
                src = "model.decoder." + name[len("model.encoder.language_model."):]
            if src.endswith("experts.gate_up_proj") or src.endswith("experts.down_proj"):
                src += ".weight"
            if src not in weights:
                skipped.append(name)
                continue
            if tuple(weights[src].shape) != tuple(dst.shape):
                raise ValueError(f"{name} {tuple(dst.shape)} from {src} {tuple(weights[src].shape)}")
            dst.copy_(weights[src])
            used.add(src)
            loaded.append(name)
    unused = sorted(set(weights) - used)
    if unused:
        raise ValueError(f"checkpoint tensors not loaded: {unused}")
    # Rotary tables are computed, and the vision tower (under model.encoder, beside its
    # language_model) is not part of the demo base.
    bad = [n for n in skipped if not ("rotary" in n or (n.startswith("model.encoder.")
                                                        and not n.startswith("model.encoder.language_model.")))]
    if bad:
        raise ValueError(f"model tensors with no checkpoint value: {bad}")
    return model


def transformers_step(nemo_dir, model_dir, rows):
    import torch

    from nemo_automodel.components.loss.dllm_loss import encoder_ar_loss

    torch.use_deterministic_algorithms(True)
    model = demo_model(model_dir)
    for p in model.parameters():
        p.requires_grad_(False)
    cap = model.config.text_config.final_logit_softcapping
    ranks = nemo_step(nemo_dir, model_dir, rows)
    n_diff = sum(r["n_diff"] for r in ranks.values())
    n_ar = sum(r["n_ar"] for r in ranks.values())
    examples, total = [], 0.0
    with torch.no_grad():
        for rank, r in ranks.items():
            for m, batch in enumerate(r["batches"]):
                w = batch["_window"]
                ex = example_record(rank, m, batch, r["coins"][m])
                # NeMo's block-causal mask lets canvas block b see the clean prompt and the clean
                # blocks before it, and no other canvas: transformers' encoder over that context
                # and its decoder over block b alone compute the same logits for the block.
                b = ex["block"]
                lo, hi = b * BLOCK, min((b + 1) * BLOCK, len(ex["canvas_ids"]))
                context = torch.tensor([ex["clean"][:ex["prefix"] + lo]])
                full = torch.tensor([ex["clean"]])
                canvas = torch.tensor([ex["canvas_ids"][lo:hi]])
                first = model(input_ids=context, decoder_input_ids=canvas).logits
                block_logits = first
                if ex["self_conditioning"]:
                    block_logits = model(input_ids=context, decoder_input_ids=canvas, self_conditioning_logits=first).logits
                logits = torch.zeros(1, len(ex["canvas_ids"]), block_logits.shape[-1])
                logits[:, lo:hi] = block_logits.float()
                diff = r["recipe"].dllm_loss_fn(logits=logits, target_ids=w["target_ids"], noise_mask=w["noise_mask"],
                                                p_mask=w["p_mask"], loss_mask=w["loss_mask"],
                                                num_diffusion_tokens=n_diff).total_loss
                hidden = model(input_ids=full, decoder_input_ids=canvas).encoder_last_hidden_state
                enc_logits = torch.tanh(model.lm_head(hidden).float() / cap) * cap
                enc = encoder_ar_loss(enc_logits, full, valid_mask=None, num_tokens=n_ar)
                loss = diff + ENCODER_LOSS_WEIGHT * enc
                total += loss.item()
                ex.update({"diffusion_loss": diff.item(), "encoder_loss": enc.item(), "loss": loss.item(),
                           "diffusion_ce_sum": diff.item() * n_diff, "encoder_ce_sum": enc.item() * n_ar})
                examples.append(ex)
    return {"step": STEP, "seed": SEED, "num_diffusion_tokens": n_diff, "num_ar_tokens": n_ar, "examples": examples,
            "total_loss": total}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nemo", required=True, help="NeMo AutoModel source files (see NEMO_FILES)")
    ap.add_argument("--model", default=os.path.join(ROOT, "demo", "base"), help="the demo base (tokenizer and weights)")
    ap.add_argument("--rows", default=os.path.join(HERE, "testdata", "nemo", "rows.jsonl"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated sections (default all)")
    args = ap.parse_args()

    finder = install_nemo(os.path.abspath(args.nemo))
    import torch

    meta = {"torch": torch.__version__, "nemo_commit": "36044ad", "python": sys.version.split()[0]}
    try:
        import transformers

        meta["transformers"] = transformers.__version__
    except Exception as e:  # the sections that need it fail with their own message
        meta["transformers"] = f"unavailable: {e}"
    results = {"meta": meta}
    only = set(filter(None, args.only.split(",")))
    want = lambda name: not only or name in only  # noqa: E731
    nemo = os.path.abspath(args.nemo)
    for name, fn, fargs in [
        ("lr", lr, ()), ("adamw", adamw, ()), ("xavier", xavier, ()),
        ("chat", chat, (nemo, args.model, args.rows)),
        ("reduction", reduction, (nemo, args.model, args.rows)),
        ("transformers", transformers_step, (nemo, args.model, args.rows)),
    ]:
        if want(name):
            section(results, name, fn, *fargs)
    meta["stubbed_modules"] = sorted(set(finder.stubbed))
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    failed = [k for k, v in results.items() if isinstance(v, dict) and "error" in v]
    print(f"wrote {args.out}; failed sections: {failed or 'none'}")


if __name__ == "__main__":
    main()
