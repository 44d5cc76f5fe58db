#!/usr/bin/python3
"""Golden AdamW trajectory from torch.optim.AdamW (Debian python3-torch).

Ten updates of a 37-element parameter vector with fixed gradients per step,
global-norm clipping by torch.nn.utils.clip_grad_norm_ (max norm 1.0), and a
linear warm-up of 3 steps followed by cosine decay to 10% of the peak over 10
steps (a LambdaLR). Writes adamw_golden.json: the config, the initial
parameters, the gradient of every step, and the parameters and learning rate
after every step. Run from this folder: ./make_adamw.py
"""
import json, math
import torch

torch.manual_seed(3)
n, steps, warm, total, floor = 37, 10, 3, 10, 0.1
cfg = dict(lr=0.05, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0,
           warmup_steps=warm, schedule="cosine", min_lr_ratio=floor, total_steps=total)
p = torch.nn.Parameter(torch.randn(n, dtype=torch.float64))
init = p.detach().clone().tolist()
opt = torch.optim.AdamW([p], lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"], weight_decay=cfg["weight_decay"])


def factor(s):
    if s < warm:
        return (s + 1) / warm
    q = min(max((s - warm) / (total - warm - 1), 0.0), 1.0)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * q))


sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
grads, after, lrs, norms = [], [], [], []
for s in range(steps):
    g = torch.randn(n, dtype=torch.float64) * (0.1 if s % 2 else 1.0)  # some steps clip, some do not
    grads.append(g.tolist())
    p.grad = g.clone()
    lrs.append(opt.param_groups[0]["lr"])
    norms.append(float(torch.nn.utils.clip_grad_norm_([p], cfg["grad_clip"])))
    opt.step()
    sched.step()
    after.append(p.detach().clone().tolist())
json.dump(dict(config=cfg, init=init, grads=grads, lrs=lrs, grad_norms=norms, params=after), open("adamw_golden.json", "w"))
print("wrote adamw_golden.json")
