#!/usr/bin/env python3
"""Parity fixtures for r1go's model, made by Hugging Face transformers itself.

For each model in MODELS this script
  1. builds a Qwen2ForCausalLM from a Qwen2Config (random weights: every
     matrix, bias and norm weight drawn from torch.manual_seed, so that a
     bias or norm read wrongly changes the logits),
  2. saves it with save_pretrained in the fixture's dtype (float32 or
     bfloat16; tied or untied embeddings) to <out>/<name>/,
  3. loads that folder back with from_pretrained twice:
       - in float64 with eager attention, on the CPU: the reference
         ("logits", "logprob", "entropy"), the stored weights computed
         exactly;
       - in the folder's own dtype with sdpa attention, on the GPU when one
         is present: what users of transformers get ("native_*"),
  4. runs each sequence of a fixed packed batch as its own forward (batch 1,
     no padding, so no masking convention is involved), and also the whole
     packed batch as one row with position_ids restarting at each sequence,
     reporting how far transformers' own packed path is from the reference,
  5. writes <out>/<name>.golden.safetensors (float32 tensors: logits [T, V],
     logprob [T], entropy [T], and native_logits/native_logprob/
     native_entropy) and <out>/<name>.golden.json (the batch, versions,
     the errors measured here).

logprob[t] = log p(tokens[t+1] | tokens[..t]) within t's sequence, 0 at a
sequence's last token; entropy[t] is the entropy of the next-token
distribution at every t. These are r1go's model.Output conventions.

Usage, from the repository root (the GPU machine has transformers; this
machine does not):
    python3 benchmarks/gpu/make_hf_fixtures.py [--out model/testdata/hf] [--device auto|cpu|cuda]
The Go side is benchmarks/gpu/hfparity_test.go.
"""
import argparse
import inspect
import json
import math
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("make_hf_fixtures: PyTorch is not installed; run this on the GPU machine "
             "(python3 there has torch 2.11 and transformers 5.17), see benchmarks/gpu/README.md")
try:
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM
except ImportError:
    sys.exit("make_hf_fixtures: transformers is not installed in %s; run this on the GPU machine, "
             "see benchmarks/gpu/README.md" % sys.executable)
try:
    from safetensors import safe_open
    from safetensors.torch import save_file
except ImportError:
    sys.exit("make_hf_fixtures: the safetensors package is missing (transformers needs it too)")

# Tolerances (max-norm relative error, max|a-b| / max|ref|) this script
# asserts between transformers' native-dtype run and the float64 reference;
# hfparity_test.go states the same numbers for r1go.
TOL_F32 = 1e-4
TOL_BF16 = 3e-2

MODELS = {
    # Qwen2.5-0.5B's proportions shrunk: GQA 2:1, q/k/v bias, tied embeddings.
    "qwen2_tiny_tied_f32": dict(layers=2, hidden=64, inter=160, heads=4, kv=2, vocab=256, tied=True,
                                theta=1000000.0, dtype="float32", seq_lens=[9, 1, 17, 33, 4]),
    # Untied lm_head (as Qwen2.5-7B), multi-query attention, another rope base.
    "qwen2_tiny_untied_f32": dict(layers=2, hidden=64, inter=160, heads=4, kv=1, vocab=256, tied=False,
                                  theta=10000.0, dtype="float32", seq_lens=[12, 2, 40]),
    # The same shapes stored in bfloat16, as Qwen2.5 ships.
    "qwen2_tiny_tied_bf16": dict(layers=2, hidden=64, inter=160, heads=4, kv=2, vocab=256, tied=True,
                                 theta=1000000.0, dtype="bfloat16", seq_lens=[9, 1, 17, 33, 4]),
    # Small: head_dim 64 as in 0.5B, a 1K vocabulary, longer sequences (3.4 MB of weights).
    "qwen2_small_untied_bf16": dict(layers=2, hidden=256, inter=512, heads=4, kv=2, vocab=1024, tied=False,
                                    theta=1000000.0, dtype="bfloat16", seq_lens=[64, 3, 100, 31]),
}
SEED = 20261121


def qwen2_config(m):
    """A Qwen2Config in the style of the installed transformers: 5.x keeps the
    rope base in rope_parameters, 4.x in rope_theta."""
    kw = dict(vocab_size=m["vocab"], hidden_size=m["hidden"], intermediate_size=m["inter"],
              num_hidden_layers=m["layers"], num_attention_heads=m["heads"], num_key_value_heads=m["kv"],
              hidden_act="silu", max_position_embeddings=1024, initializer_range=0.02, rms_norm_eps=1e-6,
              use_cache=True, tie_word_embeddings=m["tied"], use_sliding_window=False, sliding_window=None,
              max_window_layers=m["layers"], attention_dropout=0.0, bos_token_id=m["vocab"] - 2,
              eos_token_id=m["vocab"] - 1)
    params = inspect.signature(Qwen2Config.__init__).parameters
    if "rope_parameters" in params:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": m["theta"]}
    else:
        kw["rope_theta"] = m["theta"]
    return Qwen2Config(**kw)


def check_rope(model, m, name):
    """The rope base must have reached the model whichever config key this
    transformers reads: its inv_freq is theta^(-2i/head_dim)."""
    hd = m["hidden"] // m["heads"]
    want = 1.0 / (m["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    got = getattr(getattr(model.model, "rotary_emb", None), "inv_freq", None)
    if got is None:
        print("WARN make_hf_fixtures: %s: no model.model.rotary_emb.inv_freq to check the rope base" % name)
    elif not torch.allclose(got.double(), want, rtol=1e-6, atol=0):
        raise SystemExit("make_hf_fixtures: %s: the model's rope base is not %g (inv_freq %s)"
                         % (name, m["theta"], got[:3].tolist()))


def randomise(model, hidden, gen):
    """Draws every parameter: matrices N(0, 1.5/sqrt(hidden)) so logits have
    a spread of about 1.5 (peaked enough that logprob and entropy vary),
    biases N(0, 0.1), norm weights 1 + N(0, 0.1)."""
    std = 1.5 / math.sqrt(hidden)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float32))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float32))
            else:
                p.copy_(std * torch.randn(p.shape, generator=gen, dtype=torch.float32))


def load(folder, dtype, attn, device):
    """from_pretrained across transformers versions: 'dtype' since 4.56,
    'torch_dtype' before."""
    major_minor = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if major_minor >= (4, 56) else "torch_dtype"
    model = Qwen2ForCausalLM.from_pretrained(folder, attn_implementation=attn, **{key: dtype})
    return model.to(device).eval()


def next_token_stats(logits, tokens, seq_lens):
    """logprob of the next token of the same sequence (0 at its end) and the
    entropy of every row, in float64."""
    z = logits.double()
    logp = torch.log_softmax(z, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    logprob = torch.zeros(z.shape[0], dtype=torch.float64)
    start = 0
    for n in seq_lens:
        for t in range(start, start + n - 1):
            logprob[t] = logp[t, tokens[t + 1]]
        start += n
    return logprob, entropy


@torch.no_grad()
def per_sequence_logits(model, tokens, seq_lens, device, through_head=False):
    """Each sequence as its own batch-1 forward; logits on the CPU in the
    model's dtype. through_head applies lm_head to the decoder's last hidden
    state by hand, so that no version's float32 upcast of the logits can
    touch the float64 reference."""
    out, start = [], 0
    for n in seq_lens:
        ids = torch.tensor([tokens[start:start + n]], device=device)
        if through_head:
            logits = model.lm_head(model.model(input_ids=ids).last_hidden_state)
        else:
            logits = model(input_ids=ids).logits
        out.append(logits[0].cpu())
        start += n
    return torch.cat(out)


@torch.no_grad()
def packed_logits(model, tokens, seq_lens, device):
    """The whole batch as one row, position_ids restarting per sequence: the
    packed layout r1go trains on. transformers detects packing from
    position_ids in recent versions; the error against the reference is
    reported, not asserted, since older versions ignore it under sdpa."""
    pos = [i for n in seq_lens for i in range(n)]
    ids = torch.tensor([tokens], device=device)
    return model(input_ids=ids, position_ids=torch.tensor([pos], device=device)).logits[0].float().cpu()


def rel_err(got, want):
    return float((got.double() - want.double()).abs().max() / want.double().abs().max().clamp_min(1e-30))


def make(name, m, out, device):
    folder = os.path.join(out, name)
    gen = torch.Generator().manual_seed(SEED + sum(map(ord, name)))
    cfg = qwen2_config(m)
    model = Qwen2ForCausalLM(cfg)
    check_rope(model, m, name)
    randomise(model, m["hidden"], gen)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[m["dtype"]]
    model.to(dtype).save_pretrained(folder)  # safetensors, one file, tied lm_head dropped
    files = sorted(os.listdir(folder))
    with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
        stored = set(f.keys())
    if m["tied"] == ("lm_head.weight" in stored):
        raise SystemExit("make_hf_fixtures: %s: tie_word_embeddings=%s but lm_head.weight stored=%s"
                         % (name, m["tied"], "lm_head.weight" in stored))

    n_tok = sum(m["seq_lens"])
    tokens = torch.randint(0, m["vocab"], (n_tok,), generator=gen).tolist()

    ref_model = load(folder, torch.float64, "eager", "cpu")
    ref64 = per_sequence_logits(ref_model, tokens, m["seq_lens"], "cpu", through_head=True)
    if ref64.dtype != torch.float64:
        raise SystemExit("make_hf_fixtures: %s: the reference ran in %s, not float64" % (name, ref64.dtype))
    logprob, entropy = next_token_stats(ref64, tokens, m["seq_lens"])
    del ref_model

    if dtype == torch.float32 and device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    nat_model = load(folder, dtype, "sdpa", device)
    native = per_sequence_logits(nat_model, tokens, m["seq_lens"], device).float()
    packed = packed_logits(nat_model, tokens, m["seq_lens"], device)
    del nat_model
    n_logprob, n_entropy = next_token_stats(native, tokens, m["seq_lens"])

    tol = TOL_F32 if dtype == torch.float32 else TOL_BF16
    errs = {"native_logits": rel_err(native, ref64), "native_logprob": rel_err(n_logprob, logprob),
            "native_entropy": rel_err(n_entropy, entropy), "packed_position_ids_logits": rel_err(packed, ref64)}
    over = [k for k in ("native_logits", "native_logprob", "native_entropy") if not errs[k] <= tol]  # NaN too
    for k in over:
        print("WARN make_hf_fixtures: %s: transformers %s (%s, %s) is %.3g from its own float64 run, over the "
              "tolerance %g that hfparity_test.go gives r1go against it" % (name, k, m["dtype"], device, errs[k], tol))

    save_file({"logits": ref64.float().contiguous(), "logprob": logprob.float(), "entropy": entropy.float(),
               "native_logits": native.contiguous(), "native_logprob": n_logprob.float(),
               "native_entropy": n_entropy.float()},
              os.path.join(out, name + ".golden.safetensors"), metadata={"format": "pt"})
    meta = {"name": name, "tokens": tokens, "seq_lens": m["seq_lens"], "dtype": m["dtype"], "tied": m["tied"],
            "native_device": device, "native_attention": "sdpa", "tolerance": tol, "errors": errs,
            "files": files, "transformers": transformers.__version__, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None, "seed": SEED}
    with open(os.path.join(out, name + ".golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    errs["over_tolerance"] = over
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="model/testdata/hf", help="fixture folder (default: model/testdata/hf)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                    help="where transformers' native-dtype run goes (the float64 reference is always on the CPU)")
    ap.add_argument("--only", default="", help="comma-separated fixture names (default: all)")
    args = ap.parse_args()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("make_hf_fixtures: --device cuda, but torch sees no GPU")
    torch.manual_seed(SEED)
    os.makedirs(args.out, exist_ok=True)
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    print("transformers %s, torch %s, native run on %s" % (transformers.__version__, torch.__version__, device))
    print("%-26s %-9s %12s %12s %12s %12s" % ("fixture", "dtype", "native/ref", "logprob", "entropy", "packed"))
    bad = []
    for name in names:
        if name not in MODELS:
            sys.exit("make_hf_fixtures: unknown fixture %r (have %s)" % (name, ", ".join(MODELS)))
        e = make(name, MODELS[name], args.out, device)
        print("%-26s %-9s %12.3g %12.3g %12.3g %12.3g" % (name, MODELS[name]["dtype"], e["native_logits"],
              e["native_logprob"], e["native_entropy"], e["packed_position_ids_logits"]))
        bad += ["%s %s" % (name, k) for k in e["over_tolerance"]]
    if bad:
        # The fixtures are written all the same, so that they come back from
        # the GPU machine; the tolerance is the next session's call to make.
        sys.exit("make_hf_fixtures: transformers' native run is outside the stated tolerance for: " + ", ".join(bad))


if __name__ == "__main__":
    main()
