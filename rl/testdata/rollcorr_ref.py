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
            delta = [50.0, -50.0, 800.0, -800.0, 0.0, 30.0, -3.0][k % 7]
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


# ----------------------------------------------------------------------------
# Rollout correction: verl's compute_rollout_correction_weights,
# compute_is_metrics and compute_rollout_rejection_mask, on [B, T].


def is_weights(level, C, normalize, m, mu, pi):
    lr = pi - mu
    valid = m.sum(-1) > 0
    if level == "token":
        w = np.exp(np.clip(lr, -SAFETY, SAFETY))
        log_for_metrics = lr
    else:
        if level == "sequence":
            s = masked_sum(lr, m, axis=-1)
        else:  # geometric (verl before b178a3c): the masked mean of the log-ratios
            s = masked_mean(lr, m, axis=-1)
        log_for_metrics = s
        w = np.repeat(np.exp(np.clip(s, -SAFETY, SAFETY))[:, None], m.shape[1], axis=1)
    w = w * m
    met = {}
    lo = 1.0 / C
    if level == "token":
        met["mean"] = masked_mean(w, m)
        met["ratio_fraction_high"] = masked_mean((w > C).astype(float), m)
        met["ratio_fraction_low"] = masked_mean((w < lo).astype(float), m)
        met["max"] = w[m > 0].max()
        met["min"] = w[m > 0].min()
    else:
        # DEPARTURE: sequences with no valid token are left out (verl keeps them, weight 1).
        sv = log_for_metrics[valid]
        met["max"] = math.exp(min(sv.max(), SAFETY))
        met["min"] = math.exp(sv.min())
        met["mean"] = masked_mean(w, m)
        met["ratio_fraction_high"] = (sv > math.log(C)).astype(float).mean()
        met["ratio_fraction_low"] = (sv < math.log(lo)).astype(float).mean()
    wc = np.clip(w, lo, C)
    mc = masked_mean(wc, m)
    met["std"] = math.sqrt(max(masked_mean(wc ** 2, m) - mc ** 2, 0.0)) if m.sum() > 1 else 0.0
    met["eff_sample_size"] = 1.0 / masked_mean((wc / (mc + 1e-8)) ** 2, m)
    w = np.minimum(w, C)
    if normalize:
        if level == "token":
            wm = masked_mean(w, m)
        else:
            sw = masked_mean(w, m, axis=-1)
            sm = valid.astype(float)
            wm = (sw * sm).sum() / max(sm.sum(), 1e-8)
        if wm > 1e-8:
            w = w / wm
            met["batch_norm_factor"] = wm
        else:
            met["batch_norm_factor"] = 1.0
    return w * m, {"rollout_corr/rollout_is_" + k: float(v) for k, v in met.items()}


def parse_rs(options, spec):
    specs = [x.strip() for x in str(spec).split(",") if x.strip()]
    if len(specs) == 1:
        specs = specs * len(options)
    out = {}
    for o, sp in zip(options, specs):
        if o.endswith("k1"):
            if "_" in sp:
                a, b = sp.split("_", 1)
                lo, hi = float(a), float(b)
            else:
                hi = float(sp)
                lo = 1.0 / hi
            out[o] = (math.log(lo), math.log(hi))
        else:
            out[o] = (None, float(sp))
    return out


def reject(options, spec, m, mu, pi):
    lr = np.clip(pi - mu, -SAFETY, SAFETY)
    ks = {"k1": -lr, "k2": 0.5 * lr ** 2, "k3": np.exp(lr) - 1.0 - lr}
    th = parse_rs(options, spec)
    valid = m.sum(-1) > 0
    combined = np.ones_like(m)
    met = {}
    for o in options:
        lo, hi = th[o]
        k = ks[o[-2:]]
        if o.startswith("token"):
            stat = k
        else:
            if o.startswith("seq_sum"):
                sv = masked_sum(k, m, axis=-1)
            elif o.startswith("seq_mean"):
                sv = masked_mean(k, m, axis=-1)
            else:
                sv = np.where(m > 0, k, -np.inf).max(axis=-1)
                sv = np.where(np.isneginf(sv), 0.0, sv)
            stat = np.repeat(sv[:, None], m.shape[1], axis=1)
        keep = (stat >= lo) & (stat <= hi) if lo is not None else (stat <= hi)
        keepf = keep.astype(float)
        combined = combined * keepf
        p = "rollout_corr/rollout_rs_" + o + "_"
        met[p + "mean"] = masked_mean(stat, m)
        if o.startswith("token"):
            met[p + "max"] = stat[m > 0].max()
            met[p + "min"] = stat[m > 0].min()
        else:
            met[p + "max"] = sv[valid].max()
            met[p + "min"] = sv[valid].min()
        met[p + "masked_fraction"] = masked_mean(1 - keepf, m)
        seq_keep = (~((~keep) & (m > 0))).all(axis=-1)
        met[p + "seq_masked_fraction"] = ((1.0 - seq_keep) * valid).sum() / valid.sum()
    met["rollout_corr/rollout_rs_masked_fraction"] = masked_mean(1 - combined, m)
    has = ((combined < 0.5) & (m > 0)).any(axis=-1)
    # DEPARTURE: the fraction of sequences is over those with an action token (verl: all).
    met["rollout_corr/rollout_rs_seq_masked_fraction"] = has[valid].astype(float).mean()
    return (m * combined) > 0, {k: float(v) for k, v in met.items()}


def correct_cases(mcases):
    out = []
    base = mcases[0]
    noisy = mcases[1]
    configs = [
        ("token TIS", noisy, dict(rollout_is="token", rollout_is_threshold=2.0)),
        ("sequence TIS", noisy, dict(rollout_is="sequence", rollout_is_threshold=3.0)),
        ("geometric TIS normalised", noisy, dict(rollout_is="geometric", rollout_is_threshold=1.5, rollout_is_batch_normalize=True)),
        ("token TIS normalised", base, dict(rollout_is="token", rollout_is_threshold=1.02, rollout_is_batch_normalize=True)),
        ("sequence TIS normalised", noisy, dict(rollout_is="sequence", rollout_is_threshold=2.0, rollout_is_batch_normalize=True)),
        ("token_k1 rejection", noisy, dict(rollout_rs="token_k1", rollout_rs_threshold="0.5_1.5")),
        ("seq_sum and seq_mean k1", noisy, dict(rollout_rs="seq_sum_k1,seq_mean_k1", rollout_rs_threshold="0.1_10,0.8_1.25")),
        ("k2 k3 max", noisy, dict(rollout_rs="token_k2,seq_max_k3,seq_mean_k3,seq_sum_k2", rollout_rs_threshold="0.5,2,0.3,1")),
        ("everything rejected", noisy, dict(rollout_rs="token_k1", rollout_rs_threshold="1_1")),
        ("TIS and rejection, zero-length responses", mcases[2], dict(rollout_is="token", rollout_is_threshold=1.01, rollout_rs="seq_mean_k1", rollout_rs_threshold="1.001")),
        ("huge log-ratios", mcases[4], dict(rollout_is="sequence", rollout_is_threshold=5, rollout_rs="token_k1,seq_max_k2", rollout_rs_threshold="2,3")),
    ]
    # Ratios exactly at a threshold: train - rollout = log 2 on every token.
    at = make_case("ratio exactly at the cap", 8, [2, 1, 2])
    for t, on in enumerate(at["mask"]):
        if on:
            at["train"][t] = at["rollout"][t] + math.log(2.0)
            at["train"][t] = min(at["train"][t], 0.0)
            at["rollout"][t] = at["train"][t] - math.log(2.0)
    configs.append(("ratio exactly at the cap", at, dict(rollout_is="token", rollout_is_threshold=2.0, rollout_rs="token_k1", rollout_rs_threshold="0.5_2")))
    for name, c, cfg in configs:
        m, (mu, pi) = dense(c["offsets"], c["mask"], c["rollout"], c["train"])
        met = {}
        w = keep = None
        if cfg.get("rollout_is"):
            w, im = is_weights(cfg["rollout_is"], cfg["rollout_is_threshold"], cfg.get("rollout_is_batch_normalize", False), m, mu, pi)
            met.update(im)
            w = packed(c["offsets"], w)
        if cfg.get("rollout_rs"):
            opts = [o.strip() for o in cfg["rollout_rs"].split(",")]
            k, rm = reject(opts, cfg["rollout_rs_threshold"], m, mu, pi)
            met.update(rm)
            keep = [bool(x) for x in packed(c["offsets"], k.astype(float))]
        out.append({"name": name, "offsets": c["offsets"], "mask": c["mask"], "rollout": c["rollout"], "train": c["train"],
                    "config": cfg, "weights": w, "keep": keep, "metrics": met})
    return out


# ----------------------------------------------------------------------------
# AReaL's decoupled PPO loss (ppo_actor_loss_fn with proximal log-probs):
# ratio to the proximal policy, PPO clip and dual clip, the behaviour weight
# e^(prox - behaviour) with tokens above the cap masked, times the loss.
# Aggregated here by token-mean over the action mask (the loss count keeps the
# tokens the cap removes, as AReaL's loss_mask_count does). The gradient with
# respect to log pi is taken by central differences of this float64 loss.


def decoupled_loss(m, lp, prox, behav, adv, eps_lo, eps_hi, c_clip, cap):
    d = np.clip(lp - prox, -SAFETY, SAFETY)  # DEPARTURE: AReaL does not clamp; verl's vanilla does
    ratio = np.exp(d)
    l1 = -adv * ratio
    l2 = -adv * np.clip(ratio, 1 - eps_lo, 1 + eps_hi)
    pg = np.maximum(l1, l2)
    clipfrac = masked_mean((l1 < l2).astype(float), m)
    l3 = np.sign(adv) * c_clip * adv
    lower = masked_mean(((l3 < pg) & (adv < 0)).astype(float), m)
    pg = np.minimum(pg, l3)
    bk = np.clip(prox - behav, -SAFETY, SAFETY)  # DEPARTURE: clamped like every other log-ratio here
    bw = np.exp(bk)
    bmask = (bw <= cap) & (m > 0) if cap else (m > 0)
    bw = np.where(bmask, bw, 0.0)
    pg = pg * bw
    loss = np.where(m > 0, pg, 0.0).sum() / max(m.sum(), 1)
    return loss, {"actor/pg_clipfrac": clipfrac, "actor/pg_clipfrac_lower": lower,
                  "actor/behave_imp_weight": masked_mean(bw, m), "actor/behave_mask": masked_mean(bmask.astype(float), m)}


def decoupled_cases(mcases):
    out = []
    for name, c, cap in [("no cap", mcases[1], 0.0), ("cap 1.5", mcases[1], 1.5), ("cap 5, huge ratios", mcases[4], 5.0)]:
        rng = np.random.default_rng(11)
        m, (mu, prox) = dense(c["offsets"], c["mask"], c["rollout"], c["train"])
        adv = np.where(m > 0, rng.normal(0, 1, m.shape), 0.0)
        lp = np.where(m > 0, prox + rng.normal(0, 0.3, m.shape), 0.0)
        args = (m, prox, mu, adv, 0.2, 0.28, 3.0, cap)
        loss, met = decoupled_loss(m, lp, *args[1:])
        grad = np.zeros_like(lp)
        h = 1e-6
        for i in range(m.shape[0]):
            for t in range(m.shape[1]):
                if m[i, t] == 0:
                    continue
                a = lp.copy(); a[i, t] += h
                b = lp.copy(); b[i, t] -= h
                grad[i, t] = (decoupled_loss(m, a, *args[1:])[0] - decoupled_loss(m, b, *args[1:])[0]) / (2 * h)
        out.append({"name": name, "offsets": c["offsets"], "mask": c["mask"], "behaviour": c["rollout"], "proximal": c["train"],
                    "logprob": packed(c["offsets"], lp), "advantages": packed(c["offsets"], adv), "cap": cap,
                    "loss": float(loss), "grad": packed(c["offsets"], grad), "metrics": {k: float(v) for k, v in met.items()}})
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
    mc = cases()
    json.dump(jsonable({"mismatch": mc, "correct": correct_cases(mc), "decoupled": decoupled_cases(mc)}), sys.stdout)
    sys.stdout.write("\n")
