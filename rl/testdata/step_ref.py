#!/usr/bin/python3
"""Golden values for package rl's per-turn estimators, from an independent
float64 reference.

Each batch is a list of step rows, as Agent-R1 v0.1.0 lays a step-level
batch out (agent_r1/trainer/ppo/core_algos.py): one row per model turn with
its response's token rewards and critic values, a trajectory uid, a step
index and a prompt (group) index. The estimators are written here from the
formulas of rl/advantage_step.go and Agent-R1's code, in Agent-R1's shape:
a (trajectory, step) table padded with zeros, walked backwards over steps.
The Go package packs the same rows into sequences (merged turns share one)
and finds the turns as runs of action tokens, so the two share no layout.

Run:
    /usr/bin/python3 rl/testdata/step_ref.py > rl/testdata/step_golden.json
"""
import json

import numpy as np


def make_case(seed, group_sizes, max_turns, process):
    """Random trajectories: each of 1..max_turns turns with 1..5 response
    tokens; outcome reward on the last token of the last turn; process
    rewards (when `process`) on the last token of every other turn. A turn
    after the first continues its predecessor's sequence (merged) with
    probability 1/2, adding 1..4 observation tokens, or starts a new one
    with a prompt of 2..6 tokens."""
    rng = np.random.default_rng(seed)
    rows, trajs = [], []
    uid = 0
    for g, n in enumerate(group_sizes):
        for _ in range(n):
            T = int(rng.integers(1, max_turns + 1))
            steps = []
            for k in range(T):
                L = int(rng.integers(1, 6))
                r = np.zeros(L)
                if k == T - 1:
                    r[-1] = float(rng.choice([0.0, 1.0, -0.5, 2.0]))
                elif process:
                    r[-1] = float(np.round(rng.normal() * 0.3, 3))
                v = rng.normal(size=L)
                merged = k > 0 and bool(rng.integers(0, 2))
                ctx = int(rng.integers(1, 5)) if merged else int(rng.integers(2, 7))
                steps.append({"context": ctx, "merged": merged, "rewards": r.tolist(), "values": v.tolist()})
                rows.append({"uid": uid, "step": k, "group": 100 + 3 * g, "rewards": r, "values": v})
            trajs.append({"group": 100 + 3 * g, "steps": steps})
            uid += 1
    return rows, trajs


def step_gae(rows, gamma, lam):
    """Agent-R1's compute_gae_advantage_return: step reward = sum of the
    row's token rewards, V = the row's first value, GAE over steps with the
    table padded by zeros, returns = A + V, A whitened over rows with the
    unbiased std and 1e-8."""
    uids = sorted({r["uid"] for r in rows})
    inv = {u: i for i, u in enumerate(uids)}
    S = max(r["step"] for r in rows) + 1
    R = np.zeros((len(uids), S))
    V = np.zeros((len(uids), S))
    for r in rows:
        R[inv[r["uid"]], r["step"]] = r["rewards"].sum()
        V[inv[r["uid"]], r["step"]] = r["values"][0]
    last = np.zeros(len(uids))
    A = np.zeros((len(uids), S))
    for t in reversed(range(S)):
        nv = V[:, t + 1] if t < S - 1 else 0.0
        delta = R[:, t] + gamma * nv - V[:, t]
        last = delta + gamma * lam * last
        A[:, t] = last
    adv = np.array([A[inv[r["uid"]], r["step"]] for r in rows])
    ret = adv + np.array([r["values"][0] for r in rows])
    adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
    return adv, ret


def reward_to_go(rows, gamma):
    """G[uid][k] = sum over m >= k of gamma^(m-k) r_m, r_m the step reward."""
    by = {}
    for r in rows:
        by.setdefault(r["uid"], {})[r["step"]] = r["rewards"].sum()
    G = {}
    for u, st in by.items():
        T = max(st) + 1
        g = np.zeros(T)
        acc = 0.0
        for k in reversed(range(T)):
            acc = st[k] + gamma * acc
            g[k] = acc
        G[u] = g
    return G


def groups_of(rows):
    out = {}
    for r in rows:
        out.setdefault(r["group"], [])
        if r["uid"] not in out[r["group"]]:
            out[r["group"]].append(r["uid"])
    return out


def traj_grpo(rows, norm):
    """Agent-R1's compute_grpo_outcome_advantage: one total score per
    trajectory, group mean and unbiased std (a group of one: 0 and 1),
    broadcast to every step."""
    total = {}
    for r in rows:
        total[r["uid"]] = total.get(r["uid"], 0.0) + r["rewards"].sum()
    adv = {}
    for g, us in groups_of(rows).items():
        s = np.array([total[u] for u in us])
        mean, std = (0.0, 1.0) if len(us) == 1 else (s.mean(), s.std(ddof=1))
        for u in us:
            adv[u] = (total[u] - mean) / (std + 1e-6) if norm else total[u] - mean
    a = np.array([adv[r["uid"]] for r in rows])
    return a, a


def step_grpo(rows, gamma, norm):
    G = reward_to_go(rows, gamma)
    adv = {}
    for g, us in groups_of(rows).items():
        g0 = np.array([G[u][0] for u in us])
        mean, std = (0.0, 1.0) if len(us) == 1 else (g0.mean(), g0.std(ddof=1))
        for u in us:
            adv[u] = (G[u] - mean) / (std + 1e-6) if norm else G[u] - mean
    a = np.array([adv[r["uid"]][r["step"]] for r in rows])
    return a, a


def step_rloo(rows, gamma):
    G = reward_to_go(rows, gamma)
    adv = {}
    for g, us in groups_of(rows).items():
        g0 = {u: G[u][0] for u in us}
        for u in us:
            others = [g0[o] for o in us if o != u]
            base = np.mean(others) if others else 0.0
            adv[u] = G[u] - base
    a = np.array([adv[r["uid"]][r["step"]] for r in rows])
    return a, a


def main():
    cases = []
    for seed, sizes, turns, process, gamma, lam in [
        (1, [3, 4], 4, False, 1.0, 1.0),
        (2, [5, 1, 3], 5, True, 0.9, 0.95),
        (3, [4, 4, 2], 3, True, 1.0, 0.8),
        (4, [2, 6], 6, False, 0.7, 1.0),
    ]:
        rows, trajs = make_case(seed, sizes, turns, process)
        out = {}
        out["step_gae"] = step_gae(rows, gamma, lam)
        out["grpo"] = traj_grpo(rows, True)
        out["grpo_dr"] = traj_grpo(rows, False)
        out["step_grpo"] = step_grpo(rows, gamma, True)
        out["step_grpo_dr"] = step_grpo(rows, gamma, False)
        out["step_rloo"] = step_rloo(rows, gamma)
        cases.append({
            "seed": seed, "gamma": gamma, "lam": lam, "trajectories": trajs,
            "expected": {k: {"advantages": a.tolist(), "returns": r.tolist()} for k, (a, r) in out.items()},
        })
    json.dump({"cases": cases}, __import__("sys").stdout, indent=1)


if __name__ == "__main__":
    main()
