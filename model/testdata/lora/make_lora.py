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

With dropout (<name>.lora_dropout_golden.safetensors): the same adapters
with lora_dropout = P_DROP, PEFT's formula W x + (alpha/r) B A drop(x),
drop(x) = x * mask / (1 - p), where each projection's mask over its
[T, in] input is r1go's (model.DropoutMaskKey and model.DropoutKeep,
re-implemented below from their documented formulas) for SEED and the
first training forward (draw 1). Here the adapted projections are computed
as written, not merged, since the mask acts on the adapter's input only.
Also saves every mask, for inspection.

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


P_DROP, SEED = 0.3, 7
MASK64 = (1 << 64) - 1
PHI = 0x9E3779B97F4A7C15


def mix(z):
    """SplitMix64's finaliser."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def dropout_mask(layer, mod, T, fin, draw=1):
    """r1go's mask: 1 where element i of the row-major [T, fin] input is kept."""
    key = mix((mix((SEED + draw * PHI) & MASK64) + 16 * layer + MODULES.index(mod)) & MASK64)
    keep = [(mix((key + i * PHI) & MASK64) >> 11) / float(1 << 53) >= P_DROP for i in range(T * fin)]
    return torch.tensor(keep, dtype=torch.float64).view(T, fin)


class Adapted:
    """A projection read as h @ W.T that computes W h + scale * B A drop(h)."""

    def __init__(self, w, a, b, mask):
        self.w, self.a, self.b, self.mask = w, a, b, mask

    @property
    def T(self):
        return self

    def __rmatmul__(self, h):
        return h @ self.w.T + (ALPHA / R) * ((h * self.mask / (1 - P_DROP)) @ self.a.T) @ self.b.T


class Dropped(dict):
    """Weights whose adapted projections apply the adapter with dropout."""

    def __init__(self, base, lora, masks):
        super().__init__(base)
        self.lora, self.masks = lora, masks

    def __getitem__(self, name):
        w = dict.__getitem__(self, name)
        stem = name[: -len(".weight")] if name.endswith(".weight") else None
        if stem is not None and stem + ".lora_A.weight" in self.lora:
            return Adapted(w, self.lora[stem + ".lora_A.weight"], self.lora[stem + ".lora_B.weight"], self.masks[stem])
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

        T = len(ids)
        masks = {}
        for l in range(m["layers"]):
            for mod in MODULES:
                masks[f"model.layers.{l}.{block(mod)}.{mod}"] = dropout_mask(l, mod, T, dims[mod][0])
        params = {k: v.clone().requires_grad_(True) for k, v in lora.items()}
        _, lp, ent = mg.forward(m, Dropped(base, params, masks), ids, inp["seq_lens"])
        loss = (a * lp).sum() + (b * ent).sum()
        loss.backward()
        out = {"logprob": lp.detach(), "entropy": ent.detach()}
        for k, p in params.items():
            out["grad." + k] = p.grad
        for k, mk in masks.items():
            out["mask." + k] = mk
        mg.write_safetensors(os.path.join(here, name + ".lora_dropout_golden.safetensors"), out)
        print(name, "dropout loss", float(loss), "kept", float(sum(mk.sum() for mk in masks.values()) / sum(mk.numel() for mk in masks.values())))


if __name__ == "__main__":
    main()
