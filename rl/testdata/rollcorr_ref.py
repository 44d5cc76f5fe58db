#!/usr/bin/python3
"""Golden values for the rollout mismatch metrics and the rollout correction
of package rl, from an independent float64 reference.

Implements verl's formulas (b178a3c: verl/utils/debug/metrics.py,
verl/trainer/ppo/rollout_corr_helper.py, the rollout_is_weights product in
core_algos.compute_policy_loss_vanilla) and AReaL's decoupled PPO loss
(ppo_actor_loss_fn with proximal log-probs and behav_imp_weight_cap) the way
their code computes them: numpy on dense padded [B, T] arrays with a 0/1
response mask, masked means with verl's +1e-8. The Go package works on packed
sequences, so the two share no code path. Where the Go package departs from
verl on purpose the departure is written here too, marked DEPARTURE.

Run with Debian's python3 (python3-numpy):
    /usr/bin/python3 rl/testdata/rollcorr_ref.py > rl/testdata/rollcorr_golden.json
"""
import json
import math
import sys

import numpy as np

SAFETY = 20.0


def masked_sum(x, m, axis=None):
    return np.where(m > 0, x, 0.0).sum(axis=axis)


def masked_mean(x, m, axis=None):
    return masked_sum(x, m, axis) / (m.sum(axis=axis) + 1e-8)


def dense(offsets, mask, *fields):
    """Pads packed sequences to [B, T]; returns the mask and the fields."""
    B = len(offsets) - 1
    T = max([offsets[i + 1] - offsets[i] for i in range(B)] + [1])
    m = np.zeros((B, T))
    outs = [np.zeros((B, T)) for _ in fields]
    for i in range(B):
        for k, t in enumerate(range(offsets[i], offsets[i + 1])):
            m[i, k] = 1.0 if mask[t] else 0.0
            for o, f in zip(outs, fields):
                o[i, k] = f[t] if mask[t] else 0.0
    return m, outs


def packed(offsets, x):
    out = []
    for i in range(len(offsets) - 1):
        out.extend(x[i, : offsets[i + 1] - offsets[i]].tolist())
    return out


# ----------------------------------------------------------------------------
# Mismatch metrics


def mismatch(offsets, mask, rollout, train):
    m, (mu, pi) = dense(offsets, mask, rollout, train)
    if m.sum() == 0:
        return {"training/rollout_probs_diff_valid": 0.0}
    sel = m > 0
    # verl/utils/debug/metrics.py: |p_actor - p_rollout| over the mask, torch.std (unbiased).
    d = np.abs(np.exp(pi) - np.exp(mu))[sel]
    # DEPARTURE: one token gives std 0 (torch: NaN).
    std = float(np.std(d, ddof=1)) if d.size > 1 else 0.0
    out = {
        "training/rollout_probs_diff_valid": 1.0,
        "training/rollout_probs_diff_max": float(d.max()),
        "training/rollout_probs_diff_mean": float(d.mean()),
        "training/rollout_probs_diff_std": std,
    }
    lr = pi - mu
    lrc = np.clip(lr, -SAFETY, SAFETY)
    out["rollout_corr/kl"] = float(masked_mean(mu - pi, m))
    # DEPARTURE: verl's k3 uses the unclamped log-ratio (overflows past ~709).
    out["rollout_corr/k3_kl"] = float(masked_mean(np.exp(lrc) - lrc - 1, m))
    out["rollout_corr/chi2_token"] = float(masked_mean(np.exp(lrc) ** 2, m) - 1.0)
    # DEPARTURE: sequences with no valid token are left out of the sequence means
    # (verl's per-sequence masked_mean makes them log-PPL 0).
    valid = m.sum(-1) > 0
    mlp_t = masked_mean(pi, m, axis=-1)[valid]
    mlp_r = masked_mean(mu, m, axis=-1)[valid]
    out["rollout_corr/training_ppl"] = float(np.exp(-mlp_t).mean())
    out["rollout_corr/training_log_ppl"] = float((-mlp_t).mean())
    out["rollout_corr/rollout_ppl"] = float(np.exp(-mlp_r).mean())
    out["rollout_corr/rollout_log_ppl"] = float((-mlp_r).mean())
    diff = mlp_r - mlp_t
    out["rollout_corr/log_ppl_diff"] = float(diff.mean())
    out["rollout_corr/log_ppl_abs_diff"] = float(np.abs(diff).mean())
    out["rollout_corr/log_ppl_diff_max"] = float(diff.max())
    out["rollout_corr/log_ppl_diff_min"] = float(diff.min())
    out["rollout_corr/ppl_ratio"] = float(np.exp(diff).mean())
    s = np.clip(masked_sum(lr, m, axis=-1), -SAFETY, SAFETY)[valid]
    out["rollout_corr/chi2_seq"] = float(np.exp(2 * s).mean() - 1.0)
    # r1go's additions: sequence-level sums, and per-turn token means.
    out["rollout_corr/kl_seq"] = float(masked_sum(mu - pi, m, axis=-1)[valid].mean())
    out["rollout_corr/k3_kl_seq"] = float(masked_sum(np.exp(lrc) - lrc - 1, m, axis=-1)[valid].mean())
    pos = {"first": [], "middle": [], "last": []}
    for i in range(m.shape[0]):
        runs = turn_runs(m[i])
        if len(runs) < 2:
            continue
        pos["first"].append((i, runs[0]))
        pos["last"].append((i, runs[-1]))
        pos["middle"].extend([(i, r) for r in runs[1:-1]])
    for name, rs in pos.items():
        if not rs:
            continue
        tm = np.zeros_like(m)
        for i, (a, b) in rs:
            tm[i, a:b] = 1
        dd = np.abs(np.exp(pi) - np.exp(mu))
        p = "rollout_corr/turn_" + name + "/"
        out[p + "kl"] = float(masked_mean(mu - pi, tm))
        out[p + "k3_kl"] = float(masked_mean(np.exp(lrc) - lrc - 1, tm))
        out[p + "probs_diff_mean"] = float(masked_mean(dd, tm))
        out[p + "probs_diff_max"] = float(dd[tm > 0].max())
    return out


def turn_runs(row):
    runs, a = [], None
    for k, v in enumerate(row.tolist() + [0]):
        if v and a is None:
            a = k
        if not v and a is not None:
            runs.append((a, k))
            a = None
    return runs


def turns(offsets, mask, rollout, train):
    out = []
    for i in range(len(offsets) - 1):
        seq = []
        row = [1 if mask[t] else 0 for t in range(offsets[i], offsets[i + 1])]
        for a, b in turn_runs(np.array(row)):
            idx = list(range(offsets[i] + a, offsets[i] + b))
            pi = np.array([train[t] for t in idx])
            mu = np.array([rollout[t] for t in idx])
            lrc = np.clip(pi - mu, -SAFETY, SAFETY)
            d = np.abs(np.exp(pi) - np.exp(mu))
            seq.append({"tokens": len(idx), "kl": float((mu - pi).mean()),
                        "k3_kl": float((np.exp(lrc) - lrc - 1).mean()),
                        "probs_diff_mean": float(d.mean()), "probs_diff_max": float(d.max())})
        out.append(seq)
    return out


# ----------------------------------------------------------------------------
# Cases


def make_case(name, seed, lens, noise=0.05, special=None):
    """Random multi-turn sequences: a prompt, then model turns (mask 1)
    alternating with environment runs (mask 0). special: {seq: 'empty'}
    gives a response with no action token."""
    rng = np.random.default_rng(seed)
    offsets, mask, rollout, train = [0], [], [], []
    for i, nturns in enumerate(lens):
        prompt = int(rng.integers(2, 5))
        mask += [False] * prompt
        rollout += [0.0] * prompt
        train += [0.0] * prompt
        for k in range(nturns):
            n = int(rng.integers(1, 6))
            act = not (special and special.get(i) == "empty")
            for _ in range(n):
                mu = float(-rng.exponential(1.0))
                mask.append(act)
                rollout.append(mu)
                train.append(min(0.0, mu + float(rng.normal(0, noise))))
            if k + 1 < nturns:
                o = int(rng.integers(1, 4))
                mask += [False] * o
                rollout += [0.0] * o
                train += [0.0] * o
        offsets.append(len(mask))
    return {"name": name, "offsets": offsets, "mask": mask, "rollout": rollout, "train": train}


def cases():
    out = [
        make_case("random multi-turn", 1, [1, 2, 3, 4, 2, 1, 5]),
        make_case("large noise", 2, [3, 3, 1, 2], noise=1.5),
        make_case("zero-length responses", 3, [2, 1, 3, 2], special={1: "empty", 3: "empty"}),
        make_case("single token", 4, [1]),
    ]
    c = out[-1]
    for t, on in enumerate(c["mask"]):
        if on:
            c["mask"] = [False] * len(c["mask"])
            c["mask"][t] = True
            break
    h = make_case("huge log-ratios", 5, [2, 3, 1])
    k = 0
    for t, on in enumerate(h["mask"]):
        if on:
            # log-probs stay <= 0: a positive log-ratio lowers the sampler's.
            delta = [50.0, -50.0, 800.0, -800.0, 0.0][k % 5]
            if delta > 0:
                h["rollout"][t] = h["train"][t] - delta
            else:
                h["train"][t] = h["rollout"][t] + delta
            k += 1
    out.append(h)
    e = make_case("all tokens masked", 6, [2, 2])
    e["mask"] = [False] * len(e["mask"])
    out.append(e)
    n = make_case("NaN outside the mask", 7, [2, 2])
    n["nan_train"] = [t for t, on in enumerate(n["mask"]) if not on]
    for t in n["nan_train"]:
        n["train"][t] = float("nan")
    out.append(n)
    for c in out:
        c["metrics"] = mismatch(c["offsets"], c["mask"], c["rollout"], c["train"])
        c["turns"] = turns(c["offsets"], c["mask"], c["rollout"], c["train"])
        for t in c.get("nan_train", []):
            c["train"][t] = 0.0  # JSON has no NaN: the test puts it back at nan_train
    return out


def jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [jsonable(v) for v in x]
    return x


if __name__ == "__main__":
    json.dump(jsonable({"mismatch": cases()}), sys.stdout)
    sys.stdout.write("\n")
