#!/usr/bin/env python3
"""PyTorch-eager peer of `probe bench`: one LoRA training step of DiffusionGemma, hand-written.

The same model as model/diffusiongemma (encoder over the prompt filling a K/V cache, decoder over
the canvas reading it, the MoE layer, the softcapped tied head), the same LoRA (rank 8, scale 8,
one A/B set per adapted linear used by both passes, on q/k/v/o and the dense gate/up/down), the
reference objective (t ~ U(0.4, 0.8), uniform-random replacement, cross-entropy over the
corrupted positions) and AdamW, written the way a careful PyTorch user would write it on a CPU:
float32, fused linears (F.linear), grouped-query attention without copying K/V, the experts as a
loop over the experts hit with index_select / index_add_ (as transformers' eager experts do).

It reads a `probe mkmodel` checkpoint (config.json and model.safetensors; quantized tensors are
dequantized to float32 at load, W = scales·q + biases), so the geometry — and, with
--check-logits, the forward itself — matches `probe bench` / `probe forward` on the same
directory. It prints the JSON fields of `probe bench --json`.

    python3 bench/peer_torch.py --model DIR --prompt-len 64 --canvas-len 64 --steps 5 --threads 2 --json

On Debian: apt-get install python3-torch libopenblas0-pthread (without OpenBLAS, torch's CPU
matmul is about ten times slower).
"""

import argparse
import json
import math
import os
import resource
import struct
import sys
import time

# torch runs its own intra-op threads (set_num_threads below); an OpenBLAS that also
# starts one thread per core oversubscribes them (measured on the 2-core box: small 64/64
# 296 tok/s that way, 443 with OpenBLAS single-threaded). Keep the peer at its best.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch
import torch.nn.functional as F

LORA_KEYS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]

ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
             "U32": torch.int32, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8}


def read_safetensors(path):
    """All tensors of a safetensors file (U32 read as int32 bit patterns)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=ST_DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]) if info["shape"] else t.reshape(())
    return out


def load_weights(model_dir):
    path = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(path):
        return read_safetensors(path)
    index = json.load(open(os.path.join(model_dir, "model.safetensors.index.json")))
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        out.update(read_safetensors(os.path.join(model_dir, shard)))
    return out


def dequantize(packed, scales, biases, bits):
    """MLX affine dequantization: codes are a little-endian bit stream per row."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    per = 32 // bits
    shifts = torch.arange(per, dtype=torch.int64) * bits
    codes = (words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    codes = codes.reshape(*packed.shape[:-1], packed.shape[-1] * per).to(torch.float32)
    group = codes.shape[-1] // scales.shape[-1]
    q = codes.reshape(*codes.shape[:-1], scales.shape[-1], group)
    w = scales.float().unsqueeze(-1) * q + biases.float().unsqueeze(-1)
    return w.reshape(codes.shape)


def tensor(ws, quant, module):
    """A module's float32 weight, dequantized when the checkpoint holds codes (bits and group
    from config.json's quantization map: the module's entry, else the default)."""
    key = module + ".weight"
    if module + ".scales" not in ws:
        return ws[key].float()
    q = quant.get(module)
    bits = q["bits"] if isinstance(q, dict) else quant["bits"]
    return dequantize(ws[key], ws[module + ".scales"], ws[module + ".biases"], bits)


class LoRA(torch.nn.Module):
    def __init__(self, w, rank, scale, gen):
        super().__init__()
        out_f, in_f = w.shape
        self.w = w
        bound = 1 / math.sqrt(in_f)
        self.a = torch.nn.Parameter((torch.rand(in_f, rank, generator=gen) * 2 - 1) * bound)
        self.b = torch.nn.Parameter(torch.zeros(rank, out_f))
        self.scale = scale

    def forward(self, x):
        return torch.addmm(F.linear(x, self.w).flatten(0, -2), (x @ self.a).flatten(0, -2), self.b,
                           alpha=self.scale).view(*x.shape[:-1], self.w.shape[0])


class Plain:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return F.linear(x, self.w)


def rms(x, w, eps):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * w if w is not None else y


def rope(x, inv_freq, offset):
    """Rotate-half RoPE on x [B, H, S, D] for positions offset.. (inv_freq [D/2], 0 = no turn)."""
    s, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(offset, offset + s, dtype=torch.float32)
    ang = pos[:, None] * inv_freq[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def attention(q, k, v, mask):
    """softmax(q·kᵀ)·v, scale 1, GQA without copying K/V: the G query heads of a kv head are
    one [G·Lq, D] block. mask (bool, True = attend) is [Lq, Lk] or None."""
    b, hq, lq, d = q.shape
    hkv, lk = k.shape[1], k.shape[2]
    g = hq // hkv
    qb = q.reshape(b, hkv, g * lq, d)
    s = qb @ k.transpose(-1, -2)
    if mask is not None:
        s = s.masked_fill(~mask.repeat(g, 1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).reshape(b, hq, lq, v.shape[-1])


class Layer:
    def __init__(self, ws, quant, t, i, rank, scale, gen, params):
        p = f"model.decoder.layers.{i}."
        self.full = t["layer_types"][i] == "full_attention"
        self.hd = t["global_head_dim"] if self.full else t["head_dim"]
        self.nkv = t["num_global_key_value_heads"] if self.full else t["num_key_value_heads"]
        self.nh = t["num_attention_heads"]
        self.eps = t["rms_norm_eps"]
        self.window = t["sliding_window"]
        self.lin = {}
        for key in LORA_KEYS + ["router.proj"]:
            if key == "self_attn.v_proj" and self.full:
                continue
            w = tensor(ws, quant, p + key)
            if key in LORA_KEYS:
                m = LoRA(w, rank, scale, gen)
                params += [m.a, m.b]
                self.lin[key] = m
            else:
                self.lin[key] = Plain(w)
        g = lambda n: ws[p + n].float()
        self.q_norm, self.k_norm = g("self_attn.q_norm.weight"), g("self_attn.k_norm.weight")
        self.norms = {n: g(n + ".weight") for n in ["input_layernorm", "post_attention_layernorm",
                      "pre_feedforward_layernorm", "post_feedforward_layernorm_1",
                      "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2",
                      "post_feedforward_layernorm"]}
        self.router_scale, self.per_expert = g("router.scale"), g("router.per_expert_scale")
        self.gate_up = tensor(ws, quant, p + "experts.gate_up_proj")  # [E, 2I, H]
        self.down = tensor(ws, quant, p + "experts.down_proj")  # [E, H, I]
        self.scalar = g("layer_scalar")
        self.enc_scalar = ws[f"model.encoder.language_model.layers.{i}.layer_scalar"].float()
        self.topk = t["top_k_experts"]
        # RoPE inverse frequencies (proportional on full layers: exponent over the full head).
        rp = t["rope_parameters"]["full_attention" if self.full else "sliding_attention"]
        d = self.hd
        angles = d // 2
        if rp.get("rope_type") == "proportional":
            angles = int(math.floor(rp.get("partial_rotary_factor", 1.0) * d / 2))
        inv = torch.zeros(d // 2, dtype=torch.float64)
        for j in range(angles):
            inv[j] = rp["rope_theta"] ** (-2 * j / d) / rp.get("factor", 1.0)
        self.inv_freq = inv.float()

    def experts(self, z, idx, w):
        """Σ_k w_k · GeGLU expert_{idx_k}(z): a loop over the experts hit."""
        zf = z.reshape(-1, z.shape[-1])
        out = torch.zeros_like(zf)
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.gate_up.shape[0]).tolist()
        tok = order // self.topk
        wsorted = w.reshape(-1)[order]
        start = 0
        inter = self.gate_up.shape[1] // 2
        for e, n in enumerate(counts):
            if n == 0:
                continue
            rows = tok[start:start + n]
            x = zf.index_select(0, rows)
            gu = F.linear(x, self.gate_up[e])
            h = F.gelu(gu[:, :inter], approximate="tanh") * gu[:, inter:]
            y = F.linear(h, self.down[e]) * wsorted[start:start + n, None]
            out.index_add_(0, rows, y)
            start += n
        return out.reshape(z.shape)

    def forward(self, x, scalar, attend, offset):
        n, eps = self.norms, self.eps
        b, s, _ = x.shape
        a_in = rms(x, n["input_layernorm"], eps)
        q = self.lin["self_attn.q_proj"](a_in).view(b, s, self.nh, self.hd)
        q = rope(rms(q, self.q_norm, eps).transpose(1, 2), self.inv_freq, offset)
        k_raw = self.lin["self_attn.k_proj"](a_in).view(b, s, self.nkv, self.hd)
        v_raw = k_raw if self.full else self.lin["self_attn.v_proj"](a_in).view(b, s, self.nkv, self.hd)
        k = rope(rms(k_raw, self.k_norm, eps).transpose(1, 2), self.inv_freq, offset)
        v = rms(v_raw, None, eps).transpose(1, 2)
        att = attend(q, k, v).transpose(1, 2).reshape(b, s, self.nh * self.hd)
        h_mid = x + rms(self.lin["self_attn.o_proj"](att), n["post_attention_layernorm"], eps)
        u = rms(h_mid, n["pre_feedforward_layernorm"], eps)
        dense = self.lin["mlp.down_proj"](F.gelu(self.lin["mlp.gate_proj"](u), approximate="tanh") * self.lin["mlp.up_proj"](u))
        h1 = rms(dense, n["post_feedforward_layernorm_1"], eps)
        r = rms(h_mid, None, eps) * self.router_scale * (1 / math.sqrt(x.shape[-1]))
        scores = self.lin["router.proj"](r)
        with torch.no_grad():
            idx = torch.topk(scores, self.topk, dim=-1).indices
        wts = torch.softmax(torch.gather(scores, -1, idx), dim=-1) * self.per_expert[idx]
        h2 = rms(self.experts(rms(h_mid, n["pre_feedforward_layernorm_2"], eps), idx, wts), n["post_feedforward_layernorm_2"], eps)
        return (h_mid + rms(h1 + h2, n["post_feedforward_layernorm"], eps)) * scalar


class Model:
    def __init__(self, model_dir, rank, scale, seed):
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        self.t = t = cfg.get("text_config", cfg)
        ws = load_weights(model_dir)
        quant = cfg.get("quantization") or cfg.get("quantization_config") or {}
        gen = torch.Generator().manual_seed(seed)
        self.params = []
        self.embed = tensor(ws, quant, "model.decoder.embed_tokens")
        self.norm = ws["model.decoder.norm.weight"].float()
        self.layers = [Layer(ws, quant, t, i, rank, scale, gen, self.params) for i in range(t["num_hidden_layers"])]
        self.eps = t["rms_norm_eps"]
        self.embed_scale = torch.tensor(math.sqrt(t["hidden_size"]), dtype=torch.float32)
        self.softcap = t.get("final_logit_softcapping") or 0

    def forward(self, prompt, canvas):
        t = self.t
        n = prompt.shape[1]
        window = t["sliding_window"]
        # Encoder: causal (and windowed on sliding layers) over the prompt; keeps K/V.
        h = self.embed[prompt] * self.embed_scale
        pos = torch.arange(n)
        causal = pos[None, :] <= pos[:, None]
        windowed = causal & (pos[None, :] > pos[:, None] - window)
        cache = []
        for l in self.layers:
            kv = {}

            def enc_attend(q, k, v, l=l, kv=kv):
                kv["k"], kv["v"] = k, v
                return attention(q, k, v, causal if l.full else windowed)
            if n > 0:
                h = l.forward(h, l.enc_scalar, enc_attend, 0)
            cache.append(kv)
        # Decoder: bidirectional over the canvas, reading the cache (last window−1 positions on
        # sliding layers).
        h = rms(self.embed[canvas] * self.embed_scale, None, self.eps)
        for l, kv in zip(self.layers, cache):
            def dec_attend(q, k, v, l=l, kv=kv):
                if "k" in kv:
                    ek, ev = kv["k"], kv["v"]
                    if not l.full:
                        ek, ev = ek[:, :, -(window - 1):], ev[:, :, -(window - 1):]
                    k, v = torch.cat([ek, k], dim=2), torch.cat([ev, v], dim=2)
                return attention(q, k, v, None)
            h = l.forward(h, l.scalar, dec_attend, n)
        z = F.linear(rms(h, self.norm, self.eps), self.embed)
        if self.softcap:
            z = torch.tanh(z / self.softcap) * self.softcap
        return z


def corrupt(target, vocab, gen):
    t = 0.4 + 0.4 * torch.rand((), generator=gen)
    mask = torch.rand(target.shape, generator=gen) < t
    if not mask.any():
        mask[..., 0] = True
    noise = torch.randint(0, vocab, target.shape, generator=gen)
    return torch.where(mask, noise, target), mask


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="probe mkmodel checkpoint directory")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--canvas-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--scale", type=float, default=8.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check-logits", metavar="FILE",
                    help="probe forward --out FILE (with --prompt-ids/--canvas-ids): print the max |Δ| of the logits and exit")
    ap.add_argument("--prompt-ids", help="comma-separated prompt ids for --check-logits")
    ap.add_argument("--canvas-ids", help="comma-separated canvas ids for --check-logits")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    m = Model(args.model, args.rank, args.scale, seed=1)
    vocab = m.t["vocab_size"]

    if args.check_logits:
        ids = lambda s: torch.tensor([[int(x) for x in s.split(",")]])
        with torch.no_grad():
            got = m.forward(ids(args.prompt_ids), ids(args.canvas_ids))
        want = read_safetensors(args.check_logits)["logits"].float()
        print(json.dumps({"max_abs_diff": float((got - want).abs().max()), "max_abs": float(want.abs().max()),
                          "argmax_agree": float((got.argmax(-1) == want.argmax(-1)).float().mean())}))
        return

    gen = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, vocab, (1, args.prompt_len), generator=gen)
    target = torch.randint(0, vocab, (1, args.canvas_len), generator=gen)
    opt = torch.optim.AdamW(m.params, lr=1e-4, weight_decay=0.0)

    def step():
        canvas, mask = corrupt(target, vocab, gen)
        logits = m.forward(prompt, canvas)
        loss = F.cross_entropy(logits[mask], target[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss)

    step()  # warm-up
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(args.steps):
        step()
    el = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    res = {
        "tokens_per_sec": (args.prompt_len + args.canvas_len) * args.steps / el,
        "ms_per_step": 1000 * el / args.steps,
        "peak_rss_bytes": r1.ru_maxrss * 1024,
        "trainable_params": sum(p.numel() for p in m.params),
        "backend": "torch-eager",
        "prompt_len": args.prompt_len, "canvas_len": args.canvas_len, "steps": args.steps, "rank": args.rank,
        "threads": args.threads, "cpu_ms_per_step": 1000 * cpu / args.steps,
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(f"torch-eager: {res['tokens_per_sec']:.1f} tokens/s, {res['ms_per_step']:.1f} ms/step, "
              f"peak RSS {res['peak_rss_bytes'] >> 20} MiB, {res['trainable_params']} trainable")


if __name__ == "__main__":
    sys.exit(main())
