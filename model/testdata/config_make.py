#!/usr/bin/env python3
"""Writes the config fixtures exactly as transformers' save_pretrained lays
them out (json.dumps(indent=2, sort_keys=True) + newline).

Values are those of formats.md section 1.2 (the four Qwen2.5-Instruct
configs), its "Robustness" notes (a transformers 4.55 re-save and a 5.x
save), and section 1.6 (Qwen2.5 generation_config.json).
Run from this folder: python3 config_make.py
"""
import json

COMMON = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
    "attention_dropout": 0.0, "initializer_range": 0.02, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
    "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16", "use_cache": True,
    "use_sliding_window": False, "max_position_embeddings": 32768, "transformers_version": "4.43.1",
}
SIZES = {  # hidden, intermediate, layers, heads, kv heads, vocab, tied, sliding_window, max_window_layers
    "0.5b": (896, 4864, 24, 14, 2, 151936, True, 32768, 21),
    "1.5b": (1536, 8960, 28, 12, 2, 151936, True, 32768, 21),
    "3b": (2048, 11008, 36, 16, 2, 151936, True, 32768, 70),
    "7b": (3584, 18944, 28, 28, 4, 152064, False, 131072, 28),
}


def qwen(size):
    h, i, n, heads, kv, v, tied, sw, mwl = SIZES[size]
    c = dict(COMMON)
    c.update(hidden_size=h, intermediate_size=i, num_hidden_layers=n, num_attention_heads=heads,
             num_key_value_heads=kv, vocab_size=v, tie_word_embeddings=tied, sliding_window=sw,
             max_window_layers=mwl)
    return c


def save(name, obj):
    with open(name, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


for size in SIZES:
    save("config_qwen2.5-%s.json" % size, qwen(size))

# A Qwen2.5-0.5B derivative re-saved by transformers 4.55: dtype next to
# torch_dtype, layer_types, sliding_window null, pad_token_id.
c = qwen("0.5b")
c.update(dtype="float32", torch_dtype="float32", layer_types=["full_attention"] * 24, sliding_window=None,
         pad_token_id=151643, transformers_version="4.55.4")
save("config_qwen2.5-0.5b-tf4.55.json", c)

# A transformers 5.x save: rope_theta only under rope_parameters, dtype only,
# eos_token_id as a list.
c = qwen("0.5b")
del c["rope_theta"], c["torch_dtype"]
c.update(rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, dtype="bfloat16",
         layer_types=["full_attention"] * 24, sliding_window=None, eos_token_id=[151645, 151643],
         pad_token_id=151643, transformers_version="5.7.0")
save("config_qwen2.5-0.5b-tf5.json", c)

# Qwen3-4B (transformers 4.51): head_dim 128 set explicitly (32 heads x 128 =
# 4096, wider than hidden 2560), attention_bias false, per-head q/k norms.
save("config_qwen3-4b.json", {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 9728,
    "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936})

save("config_qwen2.5-generation.json", {
    "bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
    "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
    "transformers_version": "4.37.0"})
