#!/usr/bin/python3
"""Golden fixtures for r1go's policy model, computed with PyTorch (Debian python3-torch, CPU).

For each tiny model below this script
  1. draws fixed random weights (torch.manual_seed),
  2. writes a Hugging Face folder: config.json, generation_config.json and a
     model.safetensors written by hand from the format's specification,
  3. runs a Qwen2/Llama decoder written here from Hugging Face's modelling
     semantics (RMSNorm, rotate-half RoPE with float32 inv_freq, grouped-query
     causal attention, SwiGLU) in float64 over a fixed packed batch, and
  4. saves, in <name>.golden.safetensors: the logits, each token's logprob of
     the next token of its sequence and the entropy of its distribution, and
     the gradient of L = sum(a*logprob) + sum(b*entropy) for every parameter
     (a, b fixed random), plus inputs.json with the batch and a, b.

Run from this folder: /usr/bin/python3 make_golden.py [name ...]
(names limit the run to those models; the draws of each model do not
depend on the others, so regenerating one leaves the rest unchanged).
"""
import json, os, struct, sys
import torch

torch.set_default_dtype(torch.float64)

MODELS = {
    # Qwen2 with q/k/v bias and tied embeddings, config in the transformers 4.x style.
    "qwen2_tied": dict(model_type="qwen2", layers=2, hidden=16, inter=24, heads=4, kv=2, vocab=40, tied=True, bias=True, theta=10000.0, style="v4"),
    # Qwen2, untied lm_head, config in the transformers 5.x style (rope_parameters, dtype).
    "qwen2_untied": dict(model_type="qwen2", layers=2, hidden=16, inter=24, heads=4, kv=1, vocab=40, tied=False, bias=True, theta=1000000.0, style="v5"),
    # Llama variant: no q/k/v bias.
    "llama_untied": dict(model_type="llama", layers=2, hidden=24, inter=32, heads=6, kv=2, vocab=48, tied=False, bias=False, theta=500000.0, style="v4"),
    # Qwen3: per-head RMSNorm of q and k before RoPE, no q/k/v bias, and a
    # head_dim (6) that is not hidden/heads (4), so q is wider than hidden.
    "qwen3_tied": dict(model_type="qwen3", layers=2, hidden=16, inter=24, heads=4, kv=2, head_dim=6, vocab=40, tied=True, bias=False, theta=1000000.0, style="v4"),
}
SEQ_LENS = [5, 1, 7, 3]
EPS = 1e-6


def config_json(name, m):
    c = {
        "architectures": [{"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}[m["model_type"]]],
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": [2, 3] if m["style"] == "v5" else 2,
        "hidden_act": "silu",
        "hidden_size": m["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": m["inter"],
        "max_position_embeddings": 128,
        "model_type": m["model_type"],
        "num_attention_heads": m["heads"],
        "num_hidden_layers": m["layers"],
        "num_key_value_heads": m["kv"],
        "rms_norm_eps": EPS,
        "tie_word_embeddings": m["tied"],
        "use_cache": True,
        "vocab_size": m["vocab"],
    }
    if m["model_type"] == "qwen2":
        c.update({"max_window_layers": m["layers"], "sliding_window": None if m["style"] == "v5" else 128, "use_sliding_window": False})
    elif m["model_type"] == "qwen3":
        c.update({"attention_bias": False, "head_dim": m["head_dim"], "max_window_layers": m["layers"], "sliding_window": None, "use_sliding_window": False})
    else:
        c.update({"attention_bias": False, "mlp_bias": False, "head_dim": m["hidden"] // m["heads"], "pretraining_tp": 1})
    if m["style"] == "v5":
        c["rope_parameters"] = {"rope_theta": m["theta"], "rope_type": "default"}
        c["dtype"] = "float32"
        c["transformers_version"] = "5.0.0"
    else:
        c["rope_theta"] = m["theta"]
        c["rope_scaling"] = None
        c["torch_dtype"] = "float32"
        c["transformers_version"] = "4.43.1"
    return c


def make_weights(m, g):
    C, I, V, NH, KVH = m["hidden"], m["inter"], m["vocab"], m["heads"], m["kv"]
    HS = m.get("head_dim", C // NH)
    w = {}
    def randn(*shape, std):
        return torch.randn(*shape, generator=g) * std
    w["model.embed_tokens.weight"] = randn(V, C, std=0.5)
    for l in range(m["layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + randn(C, std=0.1)
        w[p + "self_attn.q_proj.weight"] = randn(NH * HS, C, std=0.3)
        w[p + "self_attn.k_proj.weight"] = randn(KVH * HS, C, std=0.3)
        w[p + "self_attn.v_proj.weight"] = randn(KVH * HS, C, std=0.3)
        if m["bias"]:
            w[p + "self_attn.q_proj.bias"] = randn(NH * HS, std=0.1)
            w[p + "self_attn.k_proj.bias"] = randn(KVH * HS, std=0.1)
            w[p + "self_attn.v_proj.bias"] = randn(KVH * HS, std=0.1)
        w[p + "self_attn.o_proj.weight"] = randn(C, NH * HS, std=0.3)
        if m["model_type"] == "qwen3":
            w[p + "self_attn.q_norm.weight"] = 1 + randn(HS, std=0.1)
            w[p + "self_attn.k_norm.weight"] = 1 + randn(HS, std=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + randn(C, std=0.1)
        w[p + "mlp.gate_proj.weight"] = randn(I, C, std=0.3)
        w[p + "mlp.up_proj.weight"] = randn(I, C, std=0.3)
        w[p + "mlp.down_proj.weight"] = randn(C, I, std=0.3)
    w["model.norm.weight"] = 1 + randn(C, std=0.1)
    if not m["tied"]:
        w["lm_head.weight"] = randn(V, C, std=0.5)
    # Round to float32 once: the checkpoint is float32 and so is what r1go reads.
    return {k: v.float().double() for k, v in w.items()}


def write_safetensors(path, tensors, dtype="F32"):
    """The safetensors layout: u64 LE header size, JSON header padded with
    spaces to a multiple of 8, then the raw little-endian data."""
    fmt = {"F32": torch.float32}[dtype]
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        b = tensors[name].to(fmt).contiguous().numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms_norm(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rope(x, pos, theta):
    # x: [T, heads, HS]; inv_freq and the angles in float32, as Hugging Face computes them.
    HS = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.int64).float() / HS))
    ang = (pos.float()[:, None] * inv.float()[None, :]).double()
    emb = torch.cat([ang, ang], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    x1, x2 = x[..., : HS // 2], x[..., HS // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def forward(m, w, ids, seq_lens):
    C, NH, KVH = m["hidden"], m["heads"], m["kv"]
    HS = m.get("head_dim", C // NH)
    T = len(ids)
    pos = torch.cat([torch.arange(n) for n in seq_lens])
    seg = torch.cat([torch.full((n,), i) for i, n in enumerate(seq_lens)])
    allowed = (seg[:, None] == seg[None, :]) & (torch.arange(T)[None, :] <= torch.arange(T)[:, None])
    x = w["model.embed_tokens.weight"][ids]
    for l in range(m["layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        if m["bias"]:
            q = q + w[p + "self_attn.q_proj.bias"]
            k = k + w[p + "self_attn.k_proj.bias"]
            v = v + w[p + "self_attn.v_proj.bias"]
        q, k = q.view(T, NH, HS), k.view(T, KVH, HS)
        if m["model_type"] == "qwen3":
            # Qwen3Attention: q_norm/k_norm (RMSNorm over head_dim) before RoPE.
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"])
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"])
        q = rope(q, pos, m["theta"])
        k = rope(k, pos, m["theta"])
        v = v.view(T, KVH, HS)
        rep = NH // KVH
        k = k.repeat_interleave(rep, dim=1)  # query head h reads key-value head h // rep
        v = v.repeat_interleave(rep, dim=1)
        s = torch.einsum("thd,jhd->htj", q, k) / HS ** 0.5
        s = s.masked_fill(~allowed[None], float("-inf"))
        a = torch.einsum("htj,jhd->thd", s.softmax(-1), v).reshape(T, NH * HS)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    h = rms_norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if m["tied"] else w["lm_head.weight"]
    logits = h @ head.T
    logp = logits.log_softmax(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    nxt = torch.full((T,), -1, dtype=torch.int64)
    off = 0
    for n in seq_lens:
        nxt[off : off + n - 1] = ids[off + 1 : off + n]
        off += n
    lp = torch.where(nxt >= 0, logp.gather(-1, nxt.clamp(min=0)[:, None])[:, 0], torch.zeros(T))
    return logits, lp, entropy


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    only = sys.argv[1:]
    for i, (name, m) in enumerate(MODELS.items()):
        if only and name not in only:
            continue
        g = torch.Generator().manual_seed(1000 + i)
        w = make_weights(m, g)
        folder = os.path.join(here, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config_json(name, m), f, indent=2)
        with open(os.path.join(folder, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20}, f, indent=2)
        write_safetensors(os.path.join(folder, "model.safetensors"), w)

        T = sum(SEQ_LENS)
        ids = torch.randint(0, m["vocab"], (T,), generator=g)
        a = torch.randn(T, generator=g)
        b = torch.randn(T, generator=g)
        params = {k: v.clone().requires_grad_(True) for k, v in w.items()}
        logits, lp, ent = forward(m, params, ids, SEQ_LENS)
        loss = (a * lp).sum() + (b * ent).sum()
        loss.backward()
        out = {"logits": logits.detach(), "logprob": lp.detach(), "entropy": ent.detach(), "loss": loss.detach().reshape(1)}
        for k, p in params.items():
            out["grad." + k] = p.grad
        write_safetensors(os.path.join(here, name + ".golden.safetensors"), out)
        with open(os.path.join(here, name + ".inputs.json"), "w") as f:
            json.dump({"tokens": ids.tolist(), "seq_lens": SEQ_LENS, "a": a.tolist(), "b": b.tolist()}, f)
        print(name, "loss", float(loss))


if __name__ == "__main__":
    main()
