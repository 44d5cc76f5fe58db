#!/usr/bin/python3
"""PyTorch peer for the CPU train-step benchmark (benchmarks/cpu, section "train").

Builds a Qwen2-shaped decoder in float32 with the same sizes as the Go run
(RMSNorm, rotate-half RoPE, grouped-query causal attention, SwiGLU, tied
LM head), and times forward + backward of L = sum(logprob) + sum(entropy)
over `seqs` sequences of `seqlen` tokens, the way a PyTorch user writes it:
a [B, T] batch, materialised logits, log_softmax. Prints one JSON line:
{"seconds": best wall time of one step, "loss": ...}.

Usage: train_step.py '{"C":512,"L":8,"NH":8,"KVH":2,"I":1408,"V":8192,"seqs":4,"seqlen":512,"reps":3,"threads":2}'

Mode "update" (section "step"): the update phase of one GRPO step, timed
once: for each micro-batch of `micro_seqs` sequences, forward, the policy
loss -sum(A * logprob) / N over materialised logits, backward (gradients
accumulate), then one torch.optim.AdamW step over every parameter. Prints
{"seconds": ..., "cpu_seconds": CPU time of all threads, "max_rss_kib": peak RSS}.
"""
import json, resource, sys, time
import torch

args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
torch.manual_seed(0)
C, L, NH, KVH, I, V = (args[k] for k in ("C", "L", "NH", "KVH", "I", "V"))
B, T = args["seqs"], args["seqlen"]
if args.get("mode") == "update":
    B = args["micro_seqs"]  # rows of one micro-batch
HS = C // NH


def p(*shape, std=0.02):
    return (torch.randn(*shape) * std).requires_grad_(True)


W = {"emb": p(V, C), "norm": torch.ones(C, requires_grad=True), "layers": []}
for _ in range(L):
    W["layers"].append(dict(
        ln1=torch.ones(C, requires_grad=True), ln2=torch.ones(C, requires_grad=True),
        q=p(NH * HS, C), k=p(KVH * HS, C), v=p(KVH * HS, C),
        qb=torch.zeros(NH * HS, requires_grad=True), kb=torch.zeros(KVH * HS, requires_grad=True), vb=torch.zeros(KVH * HS, requires_grad=True),
        o=p(C, NH * HS), gate=p(I, C), up=p(I, C), down=p(C, I)))

inv = 1.0 / (1e6 ** (torch.arange(0, HS, 2).float() / HS))
ang = torch.arange(T).float()[:, None] * inv[None, :]
emb = torch.cat([ang, ang], -1)
cos, sin = emb.cos(), emb.sin()
mask = torch.full((T, T), float("-inf")).triu(1)


def rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def rope(x):
    x1, x2 = x[..., : HS // 2], x[..., HS // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def forward_logp(ids):
    """Log-probabilities [B, T, V] of the micro-batch ids (rows may be fewer than B)."""
    x = W["emb"][ids]
    for w in W["layers"]:
        h = rms(x, w["ln1"])
        q = (h @ w["q"].T + w["qb"]).view(ids.shape[0], T, NH, HS).transpose(1, 2)
        k = (h @ w["k"].T + w["kb"]).view(ids.shape[0], T, KVH, HS).transpose(1, 2)
        v = (h @ w["v"].T + w["vb"]).view(ids.shape[0], T, KVH, HS).transpose(1, 2)
        q, k = rope(q), rope(k)
        k = k.repeat_interleave(NH // KVH, 1)
        v = v.repeat_interleave(NH // KVH, 1)
        a = ((q @ k.transpose(-1, -2)) / HS ** 0.5 + mask).softmax(-1) @ v
        x = x + a.transpose(1, 2).reshape(ids.shape[0], T, C) @ w["o"].T
        h = rms(x, w["ln2"])
        x = x + (torch.nn.functional.silu(h @ w["gate"].T) * (h @ w["up"].T)) @ w["down"].T
    logits = rms(x, W["norm"]) @ W["emb"].T
    return logits.log_softmax(-1)


def step(ids):
    logp = forward_logp(ids)
    lp = logp[:, :-1].gather(-1, ids[:, 1:, None]).sum()
    ent = -(logp.exp() * logp).sum()
    loss = lp + ent
    loss.backward()
    return float(loss)


def update():
    """Forward+backward of every micro-batch of args["seqs"] sequences, then AdamW."""
    N = args["seqs"]
    ids = torch.randint(0, V, (N, T))
    adv = torch.randn(N, T - 1)
    params = [W["emb"], W["norm"]] + [t for w in W["layers"] for t in w.values()]
    opt = torch.optim.AdamW(params, lr=1e-6, weight_decay=0.01)
    opt.zero_grad()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, N, args["micro_seqs"]):
        mb = ids[i:i + args["micro_seqs"]]
        logp = forward_logp(mb)
        lp = logp[:, :-1].gather(-1, mb[:, 1:, None]).squeeze(-1)
        loss = -(adv[i:i + args["micro_seqs"]] * lp).sum() / (N * T)
        loss.backward()
        del logp, lp, loss
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return time.perf_counter() - t0, time.process_time() - c0


if args.get("mode") == "update":
    sec, cpu = update()
    print(json.dumps({"seconds": sec, "cpu_seconds": cpu, "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    sys.exit(0)

ids = torch.randint(0, V, (B, T))
step(ids)  # warm-up
best = float("inf")
for _ in range(args["reps"]):
    t0 = time.perf_counter()
    loss = step(ids)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "loss": loss}))
