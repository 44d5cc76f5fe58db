#!/usr/bin/env python3
"""Writes tiny Qwen2-shaped Hugging Face folders for the checkpoint tests,
independently of the Go code: safetensors written by hand (struct + json,
header padded with spaces to 8, {"format": "pt"} metadata), dtype
conversion by torch (float32 -> bfloat16 / float16 round to nearest even).

  ckpt_tiny_f32/        untied, one model.safetensors in F32 (the exact values)
  ckpt_tiny_bf16_tied/  tied (no lm_head.weight), one file in BF16
  ckpt_tiny_f16_shards/ untied, two F16 shards + model.safetensors.index.json

h=8, heads=2, kv heads=1, layers=2, vocab=32, intermediate=16. All three
hold the same values, drawn from torch.manual_seed(7).
Run from this folder with a Python that has torch (Debian: /usr/bin/python3).
"""
import json
import os
import struct

import torch

H, I, L, NH, KVH, V = 8, 16, 2, 2, 1, 32
HD = H // NH
KV = KVH * HD
ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
         "I64", "U64"]
NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def config(tied, dtype):
    return {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 30,
            "eos_token_id": 31, "hidden_act": "silu", "hidden_size": H, "initializer_range": 0.02,
            "intermediate_size": I, "max_position_embeddings": 64, "max_window_layers": 2, "model_type": "qwen2",
            "num_attention_heads": NH, "num_hidden_layers": L, "num_key_value_heads": KVH, "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0, "sliding_window": 64, "tie_word_embeddings": tied, "torch_dtype": dtype,
            "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False, "vocab_size": V}


def tensors(tied):
    g = torch.Generator().manual_seed(7)
    out = {}

    def add(name, *shape):
        out[name] = torch.randn(*shape, generator=g) * 0.5

    add("model.embed_tokens.weight", V, H)
    for l in range(L):
        p = "model.layers.%d." % l
        add(p + "input_layernorm.weight", H)
        add(p + "self_attn.q_proj.weight", H, H)
        add(p + "self_attn.q_proj.bias", H)
        add(p + "self_attn.k_proj.weight", KV, H)
        add(p + "self_attn.k_proj.bias", KV)
        add(p + "self_attn.v_proj.weight", KV, H)
        add(p + "self_attn.v_proj.bias", KV)
        add(p + "self_attn.o_proj.weight", H, H)
        add(p + "post_attention_layernorm.weight", H)
        add(p + "mlp.gate_proj.weight", I, H)
        add(p + "mlp.up_proj.weight", I, H)
        add(p + "mlp.down_proj.weight", H, I)
    add("model.norm.weight", H)
    add("lm_head.weight", V, H)  # drawn always, so every folder holds the same values
    if tied:
        del out["lm_head.weight"]
    return out


def write_file(path, tensors):
    items = sorted(tensors.items(), key=lambda kv: (-ORDER.index(NAMES[kv[1].dtype]), kv[0]))
    header = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, t in items:
        b = t.contiguous().view(torch.int16 if t.element_size() == 2 else torch.int32).numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    return len(data)


def folder(name, tied, dtype, shards):
    os.makedirs(name, exist_ok=True)
    for f in os.listdir(name):
        os.remove(os.path.join(name, f))
    with open(os.path.join(name, "config.json"), "w") as f:
        f.write(json.dumps(config(tied, {torch.float32: "float32", torch.bfloat16: "bfloat16",
                                         torch.float16: "float16"}[dtype]), indent=2, sort_keys=True) + "\n")
    ts = {k: v.to(dtype) for k, v in tensors(tied).items()}
    if shards == 1:
        write_file(os.path.join(name, "model.safetensors"), ts)
        return
    names = list(ts)  # module order, split in the middle as save_pretrained would
    half = len(names) // 2
    parts = [names[:half], names[half:]]
    weight_map, total = {}, 0
    for k, part in enumerate(parts):
        shard = "model-%05d-of-%05d.safetensors" % (k + 1, len(parts))
        total += write_file(os.path.join(name, shard), {n: ts[n] for n in part})
        weight_map.update({n: shard for n in part})
    with open(os.path.join(name, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True) + "\n")


folder("ckpt_tiny_f32", False, torch.float32, 1)
folder("ckpt_tiny_bf16_tied", True, torch.bfloat16, 1)
folder("ckpt_tiny_f16_shards", False, torch.float16, 2)
