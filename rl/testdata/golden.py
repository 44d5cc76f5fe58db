#!/usr/bin/python3
"""Golden values for package rl, from an independent reference.

Implements verl's core_algos formulas (b178a3c) as written in the project's
reference/agent-r1.md section 5, with the project choices of section 7, on
dense padded [B, T] tensors the way verl lays them out: numpy for rewards and
advantage estimators (Agent-R1's compress-then-scatter form for GAE and
REINFORCE++), torch float64 autograd for every loss and its gradient.
The Go package works on packed sequences with hand-written gradients, so the
two share no code path.

Run with Debian's python3 (python3-numpy, python3-torch):
    /usr/bin/python3 rl/testdata/golden.py > rl/testdata/golden.json
"""
import json
import sys

import numpy as np
import torch

TOOL_END = 7  # token id that ends a tool call (stands in for Qwen's </tool_call>)
EPS = 1e-8


# ----------------------------------------------------------------------------
# Batches


def make_batch(seed, group_sizes, special):
    """Random multi-turn trajectories: prompt, then model turns (action tokens)
    alternating with environment runs (tool output, markup). `special` maps a
    sequence index to a shape: 'one' = one action token, 'masked' = response
    with no action token, 'empty' = prompt only."""
    rng = np.random.default_rng(seed)
    seqs, groups = [], []
    gid = 100
    for g in group_sizes:
        for _ in range(g):
            groups.append(gid)
        gid += 7
    S = len(groups)
    for i in range(S):
        p = int(rng.integers(2, 5))
        toks = list(rng.integers(10, 50, size=p))
        mask = [0] * p
        kind = special.get(i)
        if kind == 'one':
            toks.append(int(rng.integers(10, 50)))
            mask.append(1)
        elif kind == 'masked':
            n = int(rng.integers(2, 5))
            toks += list(rng.integers(10, 50, size=n))
            mask += [0] * n
        elif kind == 'empty':
            pass
        else:
            turns = int(rng.integers(1, 4))
            for k in range(turns):
                n = int(rng.integers(1, 6))
                turn = list(rng.integers(10, 50, size=n))
                last = k == turns - 1
                if not last:
                    turn.append(TOOL_END)  # the model closes its tool call
                toks += turn
                mask += [1] * len(turn)
                if not last:
                    e = int(rng.integers(1, 5))
                    toks += list(rng.integers(10, 50, size=e))
                    mask += [0] * e
        seqs.append((p, toks, mask))
    offsets = [0]
    for _, toks, _ in seqs:
        offsets.append(offsets[-1] + len(toks))
    N = offsets[-1]
    tokens = [int(t) for _, toks, _ in seqs for t in toks]
    action = [m for _, _, mask in seqs for m in mask]
    prompt_len = [p for p, _, _ in seqs]

    old = -np.abs(rng.normal(0, 1.5, N))
    ref = old + rng.normal(0, 0.3, N)
    cur = old + rng.normal(0, 0.25, N)
    # a few tokens far off to exercise the ratio clip, the dual clip and the ±20 clamp
    idx = rng.choice(N, size=6, replace=False)
    cur[idx[:2]] += [25.0, -23.0]
    cur[idx[2:]] += rng.choice([-1.5, 1.2], size=4)
    ref[idx[0]] -= 30.0  # k3's inner ±20 clamp and outer 10 clamp
    gspo = old + rng.normal(0, 6e-4, N)
    values = rng.normal(0, 1, N)
    old_values = values + rng.normal(0, 0.6, N)
    entropy = rng.uniform(0, 3, N)

    outcome = []
    for i in range(S):
        if sum(seqs[i][2]) == 0:
            outcome.append(0.0)
        else:
            outcome.append(float(rng.choice([-1.0, -0.5, 0.0, 0.2, 1.0])))
    # group 1 gets all-equal rewards (zero std)
    start = group_sizes[0]
    for i in range(start, start + group_sizes[1]):
        outcome[i] = 1.0
    process = []
    for i in range(S):
        calls = sum(1 for t, m in zip(seqs[i][1], seqs[i][2]) if m and t == TOOL_END)
        equal_group = start <= i < start + group_sizes[1]  # keep its scores equal
        process.append([float(x) for x in rng.normal(0, 0.4, calls)] if i % 2 == 0 and not equal_group else [])
    baseline = [float(x) for x in rng.choice([-1.0, 0.0, 0.5, 1.0], size=S)]
    return {
        'offsets': offsets, 'prompt_len': prompt_len, 'group': groups, 'tokens': tokens,
        'action_mask': action, 'old_logprob': old.tolist(), 'ref_logprob': ref.tolist(),
        'logprob': cur.tolist(), 'logprob_gspo': gspo.tolist(), 'values': values.tolist(),
        'old_values': old_values.tolist(), 'entropy': entropy.tolist(), 'outcome': outcome,
        'process': process, 'baseline': baseline, 'tool_end': TOOL_END,
    }


class Dense:
    """The packed batch as verl's padded [B, T] tensors (T = longest sequence)."""

    def __init__(self, b):
        self.b = b
        off = b['offsets']
        self.B = len(off) - 1
        self.T = max(off[i + 1] - off[i] for i in range(self.B))
        # verl's padded response length: the divisor of seq-mean-token-sum-norm
        self.T_resp = max(off[i + 1] - off[i] - b['prompt_len'][i] for i in range(self.B))
        self.off = off

    def d(self, x):
        out = np.zeros((self.B, self.T))
        for i in range(self.B):
            s, e = self.off[i], self.off[i + 1]
            out[i, :e - s] = x[s:e]
        return out

    def p(self, x):
        x = np.asarray(x, dtype=np.float64)
        return [float(x[i, t]) for i in range(self.B) for t in range(self.off[i + 1] - self.off[i])]

    def response_mask(self):
        m = np.zeros((self.B, self.T))
        for i in range(self.B):
            n = self.off[i + 1] - self.off[i]
            m[i, self.b['prompt_len'][i]:n] = 1
        return m


# ----------------------------------------------------------------------------
# Masked statistics (verl_F)


def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + EPS)


def masked_whiten(x, m):
    n = m.sum()
    assert n > 1
    mu = masked_mean(x, m)
    var = masked_mean((x - mu) ** 2, m) * n / (n - 1)
    return (x - mu) / np.sqrt(var + EPS) * m


# ----------------------------------------------------------------------------
# Rewards


def place_scores(dn, prime):
    b = dn.b
    outcome = np.zeros((dn.B, dn.T))
    proc = np.zeros((dn.B, dn.T))
    am = dn.d(b['action_mask'])
    tok = dn.d(b['tokens'])
    for i in range(dn.B):
        idx = np.nonzero(am[i])[0]
        if len(idx):
            outcome[i, idx[-1]] = b['outcome'][i]
        ends = [t for t in idx if tok[i, t] == TOOL_END]
        for k, r in enumerate(b['process'][i]):
            proc[i, ends[k]] += r
    if prime:
        rev = np.flip(np.cumsum(np.flip(proc, 1), 1), 1)
        proc = proc / (np.abs(rev).max() + 1e-6)
    return outcome + proc


def kl_np(kind, p, q):
    if kind == 'kl':
        return p - q
    if kind == 'low_var_kl':
        d = np.clip(q - p, -20, 20)
        return np.clip(np.exp(d) - d - 1, -10, 10)
    raise ValueError(kind)


def kl_penalty(dn, scores, kind, beta, adaptive):
    b = dn.b
    m = dn.d(b['action_mask'])
    kld = kl_np(kind, dn.d(b['old_logprob']), dn.d(b['ref_logprob'])) * m
    rewards = scores - beta * kld
    current = np.mean((kld * m).sum(1) / (m.sum(1) + EPS))
    new_beta = beta
    if adaptive:
        target, horizon = adaptive
        err = np.clip(current / target - 1, -0.2, 0.2)
        new_beta = beta * (1 + err * dn.B / horizon)
    return rewards, {'actor/reward_kl_penalty': float(current), 'actor/reward_kl_penalty_coeff': beta}, new_beta


# ----------------------------------------------------------------------------
# Advantage estimators


def compress(x, m):
    """Agent-R1's extract_and_pad_by_mask: the masked entries of each row, left-aligned."""
    return [x[i][m[i] > 0] for i in range(x.shape[0])]


def scatter(rows, m):
    out = np.zeros(m.shape)
    for i, r in enumerate(rows):
        out[i][m[i] > 0] = r
    return out


def gae(r, v, m, gamma, lam):
    rs, vs = compress(r, m), compress(v, m)
    advs, rets = [], []
    for rr, vv in zip(rs, vs):
        n = len(rr)
        a = np.zeros(n)
        last = 0.0
        for t in reversed(range(n)):
            nv = vv[t + 1] if t + 1 < n else 0.0
            delta = rr[t] + gamma * nv - vv[t]
            last = delta + gamma * lam * last
            a[t] = last
        advs.append(a)
        rets.append(a + vv)
    A, R = scatter(advs, m), scatter(rets, m)
    return masked_whiten(A, m), R


def seq_scores(r, m):
    return (r * m).sum(1)


def group_index(groups):
    idx = {}
    for i, g in enumerate(groups):
        idx.setdefault(g, []).append(i)
    return idx


def grpo(r, m, groups, norm_by_std):
    s = seq_scores(r, m)
    a = np.zeros_like(s)
    for members in group_index(groups).values():
        x = s[members]
        if len(members) == 1:
            mean, std = 0.0, 1.0
            # verl: the std is float32(1.0), and σ + ε is computed in float32
            div = float(np.float32(1.0) + np.float32(1e-6))
        else:
            mean, std = x.mean(), x.std(ddof=1)
            div = std + 1e-6
        a[members] = (x - mean) / div if norm_by_std else x - mean
    A = a[:, None] * m
    return A, A


def rloo(r, m, groups):
    s = seq_scores(r, m)
    a = np.zeros_like(s)
    for members in group_index(groups).values():
        n = len(members)
        for i in members:
            a[i] = s[i] if n == 1 else s[i] - (s[members].sum() - s[i]) / (n - 1)
    A = a[:, None] * m
    return A, A


def reinforce_pp(r, m, gamma):
    rows = []
    for rr in compress(r, m):
        g, out = 0.0, np.zeros(len(rr))
        for t in reversed(range(len(rr))):
            g = rr[t] + gamma * g
            out[t] = g
        rows.append(out)
    R = scatter(rows, m)
    return masked_whiten(R, m), R


def reinforce_pp_baseline(r, m, groups):
    s = seq_scores(r, m)
    a = np.zeros_like(s)
    for members in group_index(groups).values():
        mean = 0.0 if len(members) == 1 else s[members].mean()
        a[members] = s[members] - mean
    A = masked_whiten(a[:, None] * m, m) * m
    return A, A


def remax(r, m, baseline):
    R = np.flip(np.cumsum(np.flip(r * m, 1), 1), 1) * m
    A = (R - np.asarray(baseline)[:, None]) * m
    return A, R


# ----------------------------------------------------------------------------
# Losses (torch float64, autograd)


def tt(x):
    return torch.tensor(np.asarray(x), dtype=torch.float64)


def agg_loss(L, m, mode, T):
    if mode == 'token-mean':
        return (L * m).sum() / m.sum()
    seq_sum = (L * m).sum(-1)
    seq_mask = (m.sum(-1) > 0).double()
    if mode == 'seq-mean-token-sum':
        return (seq_sum * seq_mask).sum() / seq_mask.sum()
    if mode == 'seq-mean-token-mean':
        seq_mean = seq_sum / (m.sum(-1) + 1e-8)
        return (seq_mean * seq_mask).sum() / seq_mask.sum()
    if mode == 'seq-mean-token-sum-norm':
        return (L * m).sum() / T
    raise ValueError(mode)


def t_masked_mean(x, m):
    return float(((x * m).sum() / (m.sum() + 1e-8)).item())


def ppo_vanilla(logp, old, adv, m, lo, hi, c, mode, T):
    nak = torch.clamp(logp - old, min=-20.0, max=20.0)
    ratio = torch.exp(nak)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - lo, 1 + hi)
    lc = torch.maximum(l1, l2)
    l3 = -adv * c
    lmin = torch.min(l3, lc)
    L = torch.where(adv < 0, lmin, lc)
    loss = agg_loss(L, m, mode, T)
    metrics = {
        'actor/pg_clipfrac': t_masked_mean(torch.gt(l2, l1).double(), m),
        'actor/ppo_kl': t_masked_mean(-nak.detach(), m),
        'actor/pg_clipfrac_lower': t_masked_mean((torch.gt(lc, l3) * (adv < 0)).double(), m),
    }
    return loss, metrics


def gspo(logp, old, adv, m, lo, hi, mode, T):
    nak = logp - old
    lengths = torch.clamp(m.sum(-1), min=1)
    seq_nak = (nak * m).sum(-1) / lengths
    log_ratio = logp - logp.detach() + seq_nak.detach().unsqueeze(-1)
    log_ratio = torch.clamp(log_ratio, max=10.0)
    ratio = torch.exp(log_ratio)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - lo, 1 + hi)
    L = torch.maximum(l1, l2)
    loss = agg_loss(L, m, mode, T)
    metrics = {
        'actor/pg_clipfrac': t_masked_mean(torch.gt(l2, l1).double(), m),
        'actor/ppo_kl': t_masked_mean(-nak.detach(), m),
        'actor/pg_clipfrac_lower': 0.0,
    }
    return loss, metrics


def kl_torch(kind, p, q):
    base, plus = kind.rstrip('+'), kind.endswith('+')
    if base in ('kl', 'k1'):
        k = p - q
    elif base == 'abs':
        k = (p - q).abs()
    elif base in ('mse', 'k2'):
        k = 0.5 * (p - q).square()
    elif base in ('low_var_kl', 'k3'):
        d = torch.clamp(q - p, min=-20, max=20)
        k = torch.clamp(torch.exp(d) - d - 1, min=-10, max=10)
    if plus:
        k2 = 0.5 * (p - q).square()
        k = k.detach() + k2 - k2.detach()
    return k


def value_loss(v, vold, ret, m, eps, mode, T):
    vclip = torch.max(torch.min(v, vold + eps), vold - eps)
    l1 = (v - ret) ** 2
    l2 = (vclip - ret) ** 2
    loss = 0.5 * agg_loss(torch.max(l1, l2), m, mode, T)
    metrics = {
        'critic/vf_clipfrac': t_masked_mean(torch.gt(l2, l1).double(), m),
        'critic/vpred_mean': t_masked_mean(v.detach(), m),
    }
    return loss, metrics


# ----------------------------------------------------------------------------


def run(b):
    dn = Dense(b)
    T = dn.T_resp
    am = dn.d(b['action_mask'])
    rm = dn.response_mask()
    out = {'scores': dn.p(place_scores(dn, False)), 'scores_prime': dn.p(place_scores(dn, True))}
    scores = place_scores(dn, False)

    rew_k1, met_k1, beta_k1 = kl_penalty(dn, scores, 'kl', 0.05, None)
    rew_k3, met_k3, beta_k3 = kl_penalty(dn, scores, 'low_var_kl', 0.05, (0.1, 100.0))
    out['kl_reward_fixed_k1'] = {'rewards': dn.p(rew_k1), 'metrics': met_k1, 'beta_after': beta_k1}
    out['kl_reward_adaptive_k3'] = {'rewards': dn.p(rew_k3), 'metrics': met_k3, 'beta_after': float(beta_k3)}

    V = dn.d(b['old_values'])
    groups = b['group']
    est = {
        'gae': (lambda r: gae(r, V, am, 1.0, 1.0)),
        'gae_discount': (lambda r: gae(r, V, am, 0.95, 0.9)),
        'gae_no_adv_mask': (lambda r: gae(r, V, rm, 0.95, 0.9)),
        'grpo': (lambda r: grpo(r, am, groups, True)),
        'dr_grpo': (lambda r: grpo(r, am, groups, False)),
        'rloo': (lambda r: rloo(r, am, groups)),
        'reinforce_plus_plus': (lambda r: reinforce_pp(r, am, 1.0)),
        'reinforce_plus_plus_discount': (lambda r: reinforce_pp(r, am, 0.97)),
        'reinforce_plus_plus_baseline': (lambda r: reinforce_pp_baseline(r, am, groups)),
        'remax': (lambda r: remax(r, am, b['baseline'])),
    }
    out['estimators'] = {}
    for name, f in est.items():
        A, R = f(scores)
        out['estimators'][name] = {'advantages': dn.p(A), 'returns': dn.p(R)}
    A, R = gae(rew_k1, V, am, 1.0, 1.0)
    out['estimators']['gae_kl_reward'] = {'advantages': dn.p(A), 'returns': dn.p(R)}

    # data metrics over the plain GAE run
    A, R = gae(scores, V, am, 1.0, 1.0)
    sel = am > 0
    dm = {}

    def stats(name, x):
        dm[name + '/mean'] = float(np.mean(x)) if len(x) else 0.0
        dm[name + '/max'] = float(np.max(x)) if len(x) else 0.0
        dm[name + '/min'] = float(np.min(x)) if len(x) else 0.0
    stats('critic/score', scores.sum(1))
    stats('critic/rewards', scores.sum(1))
    stats('critic/advantages', A[sel])
    stats('critic/returns', R[sel])
    stats('critic/values', V[sel])
    dm['critic/vf_explained_var'] = float(1 - np.var(R[sel] - V[sel], ddof=1) / (np.var(R[sel], ddof=1) + 1e-5))
    stats('prompt_length', np.asarray(b['prompt_len'], dtype=float))
    stats('response_length', np.asarray([b['offsets'][i + 1] - b['offsets'][i] - b['prompt_len'][i] for i in range(dn.B)], dtype=float))
    stats('action_length', am.sum(1))
    out['data_metrics'] = dm

    # losses: PPO with GAE(0.95, 0.9) advantages, GSPO with GRPO advantages
    adv_gae = gae(scores, V, am, 0.95, 0.9)[0]
    adv_grpo = grpo(scores, am, groups, True)[0]
    m_t = tt(am)
    old_t = tt(dn.d(b['old_logprob']))
    ref_t = tt(dn.d(b['ref_logprob']))
    ent_np = dn.d(b['entropy'])
    out['losses'] = {}

    def record(name, cfg, loss, metrics, leaves):
        rec = {'config': cfg, 'loss': float(loss.item()), 'metrics': metrics}
        loss.backward()
        for key, leaf in leaves.items():
            rec[key] = dn.p(leaf.grad.numpy())
        out['losses'][name] = rec

    modes = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm']
    for mode in modes:
        for lo, hi, tag in [(0.2, 0.2, ''), (0.2, 0.28, '_cliphigh')]:
            logp = tt(dn.d(b['logprob'])).requires_grad_()
            loss, met = ppo_vanilla(logp, old_t, tt(adv_gae), m_t, lo, hi, 3.0, mode, T)
            met['actor/pg_loss'] = float(loss.item())
            cfg = {'policy_loss': 'vanilla', 'clip_low': lo, 'clip_high': hi, 'clip_c': 3.0, 'agg': mode,
                   'advantages': 'gae_discount'}
            record('vanilla_' + mode + tag, cfg, loss, met, {'dlogprob': logp})
    for mode in ['seq-mean-token-mean', 'token-mean']:
        logp = tt(dn.d(b['logprob_gspo'])).requires_grad_()
        loss, met = gspo(logp, old_t, tt(adv_grpo), m_t, 3e-4, 4e-4, mode, T)
        met['actor/pg_loss'] = float(loss.item())
        cfg = {'policy_loss': 'gspo', 'clip_low': 3e-4, 'clip_high': 4e-4, 'agg': mode, 'advantages': 'grpo',
               'logprob': 'logprob_gspo'}
        record('gspo_' + mode, cfg, loss, met, {'dlogprob': logp})

    kl_types = ['kl', 'abs', 'mse', 'low_var_kl', 'k1+', 'abs+', 'k2+', 'k3+']
    for kind in kl_types:
        logp = tt(dn.d(b['logprob'])).requires_grad_()
        ent = tt(ent_np).requires_grad_()
        pg, met = ppo_vanilla(logp, old_t, tt(adv_gae), m_t, 0.2, 0.28, 3.0, 'token-mean', T)
        ent_loss = agg_loss(ent, m_t, 'token-mean', T)
        kl_loss = agg_loss(kl_torch(kind, logp, ref_t), m_t, 'token-mean', T)
        loss = pg - 0.01 * ent_loss + 0.1 * kl_loss
        met.update({'actor/pg_loss': float(pg.item()), 'actor/entropy': float(ent_loss.item()),
                    'actor/kl_loss': float(kl_loss.item()), 'actor/kl_coef': 0.1})
        cfg = {'policy_loss': 'vanilla', 'clip_low': 0.2, 'clip_high': 0.28, 'clip_c': 3.0, 'agg': 'token-mean',
               'advantages': 'gae_discount', 'entropy_coeff': 0.01, 'kl_loss_type': kind, 'kl_loss_coef': 0.1}
        record('actor_kl_' + kind, cfg, loss, met, {'dlogprob': logp, 'dentropy': ent})

    # per-token KL estimator values and derivatives (no mask)
    out['kl_estimators'] = {}
    for kind in kl_types:
        p = tt(b['logprob']).requires_grad_()
        k = kl_torch(kind, p, tt(b['ref_logprob']))
        k.sum().backward()
        out['kl_estimators'][kind] = {'value': k.detach().numpy().tolist(), 'dp': p.grad.numpy().tolist()}

    ret = gae(scores, V, am, 0.95, 0.9)[1]
    for mode in ['token-mean', 'seq-mean-token-mean']:
        v = tt(dn.d(b['values'])).requires_grad_()
        loss, met = value_loss(v, tt(V), tt(ret), m_t, 0.5, mode, T)
        met['critic/vf_loss'] = float(loss.item())
        cfg = {'agg': mode, 'cliprange_value': 0.5, 'returns': 'gae_discount'}
        record('value_' + mode, cfg, loss, met, {'dvalue': v})
    return out


def main():
    batches = [
        make_batch(1, [4, 3, 2, 1, 2], {2: 'one', 10: 'masked'}),
        make_batch(2, [3, 3, 1, 2], {0: 'empty', 4: 'one', 5: 'one', 7: 'masked'}),
    ]
    doc = {'note': 'generated by golden.py; do not edit', 'cases': []}
    for b in batches:
        doc['cases'].append({'batch': b, 'expect': run(b)})
    json.dump(doc, sys.stdout, separators=(',', ':'))
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
