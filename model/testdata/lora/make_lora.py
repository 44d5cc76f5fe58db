#!/usr/bin/python3
"""PyTorch reference for r1go's LoRA adapters (Debian python3-torch, CPU).

For the golden tiny models of ../golden (same weights, same batch, same loss
L = sum(a*logprob) + sum(b*entropy)), this script draws LoRA adapters on all
seven projections (r = 4, lora_alpha = 8, A and B both random so that every
gradient path is exercised), writes them as a PEFT adapter folder
(adapter_config.json + adapter_model.safetensors with PEFT's key names),
and computes, in float64, the adapted model's logprob and entropy and the
gradient of L with respect to every lora_A and lora_B. The adapted
projection is PEFT's formula W x + (alpha/r) B A x; the golden decoder reads
the projection matrix W + (alpha/r) B A, the same linear map, through which
autograd gives dL/dA and dL/dB.

Run from this folder: /usr/bin/python3 make_lora.py
"""
import json, os, sys
sys.dont_write_bytecode = True
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "golden"))
import make_golden as mg  # noqa: E402

torch.set_default_dtype(torch.float64)
R, ALPHA = 4, 8.0
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def block(mod):
    return "mlp" if mod in ("gate_proj", "up_proj", "down_proj") else "self_attn"


class Merged(dict):
    """Weights whose adapted projections read W + scale * B @ A."""

    def __init__(self, base, lora):
        super().__init__(base)
        self.lora = lora

    def __getitem__(self, name):
        w = dict.__getitem__(self, name)
        stem = name[: -len(".weight")] if name.endswith(".weight") else None
        if stem is not None and stem + ".lora_A.weight" in self.lora:
            a, b = self.lora[stem + ".lora_A.weight"], self.lora[stem + ".lora_B.weight"]
            w = w + (ALPHA / R) * (b @ a)
        return w


def main():
    for i, name in enumerate(["qwen2_tied", "qwen2_untied"]):
        m = mg.MODELS[name]
        g = torch.Generator().manual_seed(1000 + list(mg.MODELS).index(name))
        base = mg.make_weights(m, g)
        with open(os.path.join(here, "..", "golden", name + ".inputs.json")) as f:
            inp = json.load(f)
        ids = torch.tensor(inp["tokens"])
        a, b = torch.tensor(inp["a"]), torch.tensor(inp["b"])
        C, I, NH, KVH = m["hidden"], m["inter"], m["heads"], m["kv"]
        HS = C // NH
        dims = {"q_proj": (C, NH * HS), "k_proj": (C, KVH * HS), "v_proj": (C, KVH * HS), "o_proj": (NH * HS, C),
                "gate_proj": (C, I), "up_proj": (C, I), "down_proj": (I, C)}
        lg = torch.Generator().manual_seed(77 + i)
        lora = {}
        for l in range(m["layers"]):
            for mod in MODULES:
                fin, fout = dims[mod]
                stem = f"model.layers.{l}.{block(mod)}.{mod}"
                lora[stem + ".lora_A.weight"] = (torch.randn(R, fin, generator=lg) * 0.3).float().double()
                lora[stem + ".lora_B.weight"] = (torch.randn(fout, R, generator=lg) * 0.3).float().double()
        folder = os.path.join(here, name + "_adapter")
        os.makedirs(folder, exist_ok=True)
        mg.write_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                             {"base_model.model." + k: v for k, v in lora.items()})
        cfg = {"alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "../golden/" + name,
               "bias": "none", "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True,
               "layers_pattern": None, "layers_to_transform": None, "lora_alpha": ALPHA, "lora_dropout": 0.0,
               "modules_to_save": None, "peft_type": "LORA", "r": R, "rank_pattern": {}, "revision": None,
               "target_modules": MODULES, "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False}
        with open(os.path.join(folder, "adapter_config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        params = {k: v.clone().requires_grad_(True) for k, v in lora.items()}
        _, lp, ent = mg.forward(m, Merged(base, params), ids, inp["seq_lens"])
        loss = (a * lp).sum() + (b * ent).sum()
        loss.backward()
        out = {"logprob": lp.detach(), "entropy": ent.detach()}
        for k, p in params.items():
            out["grad." + k] = p.grad
        mg.write_safetensors(os.path.join(here, name + ".lora_golden.safetensors"), out)
        print(name, "loss", float(loss))


if __name__ == "__main__":
    main()
