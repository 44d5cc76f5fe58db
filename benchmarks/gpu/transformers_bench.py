#!/usr/bin/env python3
"""The transformers side of r1go's GPU speed table, with the ceilings it is
measured against, all in one run (performance.md §7, metrics 4 to 6).

Sections (--sections, default all):
  ceilings  device-to-device copy bandwidth (bytes read + written) and the
            best cuBLAS bf16 matmul rate over a few large shapes (torch.matmul
            on random data, median of timed repeats after warm-up)
  train     one training step (forward + backward + fused AdamW, bf16
            weights, sdpa attention) of Qwen2.5-0.5B- and 1.5B-shaped random
            models over 4096 tokens: one 4096-token row, and 4 × 1024 packed
            in one row with position_ids restarting per sequence; MFU =
            (6N + 6·L·C·T) FLOP/token × tokens/s ÷ the in-run matmul ceiling
            (llm.c's convention, T the sequence length)
  decode    generate() tokens/s, greedy, no early stop: batch 1 (16-token
            prompt) against the weight-read bound (copy bandwidth ÷ bf16
            weight bytes), and batch 256 with 2048-token prompts against the
            KV-read bound (B ÷ ((W + B·ctx·KV bytes) ÷ bandwidth)); the decode
            time is generate(n+1) − generate(1), so the prefill is left out
  rl        one GRPO-shaped RL step of the 0.5B model, transformers-style:
            256 sequences (32 prompts × 8 samples) of 256 prompt + 256
            sampled tokens; generate(), two scoring passes (old and reference
            logprobs), one update (micro-batches of 8 sequences, one AdamW
            step); phase times and verl's throughput ((prompt + response
            tokens) ÷ step time)

Prints JSON to --json and a table last. With --r1go FILE (the same keys,
written by r1go's GPU benchmark; README.md gives the schema) the table
shows r1go beside transformers with the speed-up. --smoke runs tiny shapes
(any device, seconds) to check the script itself.

Usage on the GPU machine, from the repository root (about 3 to 5 minutes):
    python3 benchmarks/gpu/transformers_bench.py --json $OUT/transformers_bench.json
"""
import argparse
import json
import math
import statistics
import sys
import time
import traceback

try:
    import torch
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM
except ImportError as e:
    sys.exit("transformers_bench: %s; run this on the GPU machine (PyTorch 2.11, transformers 5.17), "
             "see benchmarks/gpu/README.md" % e)

# Qwen2.5 shapes (formats.md §1.2); vocabulary 151936, tied embeddings.
SHAPES = {
    "0.5B": dict(layers=24, hidden=896, inter=4864, heads=14, kv=2, vocab=151936),
    "1.5B": dict(layers=28, hidden=1536, inter=8960, heads=12, kv=2, vocab=151936),
}
SMOKE = {"smoke": dict(layers=2, hidden=64, inter=128, heads=4, kv=2, vocab=512)}


class Bench:
    def __init__(self, args):
        self.args = args
        self.dev = torch.device(args.device)
        self.cuda = self.dev.type == "cuda"
        self.shapes = SMOKE if args.smoke else SHAPES
        self.res = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__},
                    "device": torch.cuda.get_device_name(0) if self.cuda else "cpu", "smoke": args.smoke,
                    "errors": {}}
        self.t0 = time.time()

    # ---- timing -----------------------------------------------------------
    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def time_median(self, fn, warmup, reps):
        """Median seconds of fn over reps after warmup calls: CUDA events on
        the GPU, the host clock after a sync elsewhere."""
        for _ in range(warmup):
            fn()
        self.sync()
        times = []
        for _ in range(reps):
            if self.cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 1e3)
            else:
                s = time.perf_counter()
                fn()
                times.append(time.perf_counter() - s)
        return statistics.median(times)

    def wall(self, fn):
        self.sync()
        s = time.perf_counter()
        out = fn()
        self.sync()
        return time.perf_counter() - s, out

    # ---- models -----------------------------------------------------------
    def model(self, name):
        m = self.shapes[name]
        kw = dict(vocab_size=m["vocab"], hidden_size=m["hidden"], intermediate_size=m["inter"],
                  num_hidden_layers=m["layers"], num_attention_heads=m["heads"], num_key_value_heads=m["kv"],
                  max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  use_sliding_window=False, bos_token_id=None, eos_token_id=None, pad_token_id=0,
                  attn_implementation="sdpa")
        cfg = Qwen2Config(**kw)
        with self.dev:  # initialise on the device (float32, then cast): a 1.5B CPU init takes long
            model = Qwen2ForCausalLM(cfg)
        model = model.to(self.dev, torch.bfloat16)
        attn = getattr(model.config, "_attn_implementation", "?")
        n = sum(p.numel() for p in model.parameters())  # tied: the embedding once
        c = m["hidden"] // m["heads"]
        info = {"params": n, "weight_bytes": 2 * n, "kv_bytes_per_token": 2 * m["layers"] * m["kv"] * c * 2,
                "layers": m["layers"], "hidden": m["hidden"], "vocab": m["vocab"], "attn_implementation": attn}
        return model, info

    # ---- sections ---------------------------------------------------------
    def ceilings(self):
        a = self.args
        n = (64 << 20) if a.smoke else (1 << 30)  # bytes per buffer: 2 GiB read + 2 GiB written on the GPU
        x = torch.randint(0, 255, (n,), dtype=torch.uint8, device=self.dev)
        y = torch.empty_like(x)
        t = self.time_median(lambda: y.copy_(x), 3, 20)
        copy = 2 * n / t
        del x, y
        shapes = [(256, 256, 256)] if a.smoke else [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384),
                                                    (6144, 6144, 6144), (2048, 13312, 2048), (4096, 8192, 4096)]
        best, rates = 0.0, {}
        for (mm, nn, kk) in shapes:
            A = torch.randn(mm, kk, device=self.dev, dtype=torch.bfloat16)
            B = torch.randn(kk, nn, device=self.dev, dtype=torch.bfloat16)
            t = self.time_median(lambda: torch.matmul(A, B), 3, 10)
            r = 2 * mm * nn * kk / t / 1e12
            rates["%dx%dx%d" % (mm, nn, kk)] = r
            best = max(best, r)
            del A, B
        self.res["ceilings"] = {"copy_bytes_per_s": copy, "copy_buffer_bytes": n, "matmul_bf16_tflops": best,
                                "matmul_bf16_tflops_by_shape": rates}

    def train(self):
        T = 256 if self.args.smoke else 4096
        out = {}
        for name in self.shapes:
            model, info = self.model(name)
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=self.cuda)
            ids = torch.randint(0, info["vocab"], (1, T), device=self.dev)
            docs = 4
            pos = torch.arange(T // docs, device=self.dev).repeat(docs).unsqueeze(0)

            def step(position_ids=None):
                loss = model(input_ids=ids, labels=ids, position_ids=position_ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            row = dict(info)
            row["tokens"] = T
            row["flops_per_token"] = 6 * info["params"] + 6 * info["layers"] * info["hidden"] * T
            row["step_s"] = self.time_median(step, 3, 10)
            try:
                row["packed4_step_s"] = self.time_median(lambda: step(pos), 2, 10)
            except Exception as e:  # an older masking path: report, keep going
                row["packed4_error"] = repr(e)[:300]
            out[name] = row
            del model, opt
            self.free()
        self.res["train"] = out

    def generate_time(self, model, prompt, new):
        """Seconds of generate(prompt, new tokens), greedy, no early stop."""
        def run():
            return model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
                                  min_new_tokens=new, do_sample=False, pad_token_id=0, use_cache=True)
        t, out = self.wall(run)
        if out.shape[1] != prompt.shape[1] + new:
            raise RuntimeError("generate returned %d tokens for %d + %d" % (out.shape[1], prompt.shape[1], new))
        return t

    def decode(self):
        a = self.args
        cases = [("b1", 1, 16, 16 if a.smoke else 128), ("b256", 8 if a.smoke else 256, 64 if a.smoke else 2048,
                                                         8 if a.smoke else 32)]
        out = {}
        for name in self.shapes:
            model, info = self.model(name)
            model.eval()
            row = dict(info)
            with torch.no_grad():
                warm = torch.randint(0, info["vocab"], (2, 8), device=self.dev)
                self.generate_time(model, warm, 4)
                for case, B, P, N in cases:
                    try:
                        prompt = torch.randint(0, info["vocab"], (B, P), device=self.dev)
                        t1 = min(self.generate_time(model, prompt, 1) for _ in range(2))
                        tn = min(self.generate_time(model, prompt, N + 1) for _ in range(2))
                    except Exception as e:  # out of memory at batch 256, say: keep batch 1's figure
                        traceback.print_exc()
                        self.res["errors"]["decode %s %s" % (name, case)] = repr(e)[:500]
                        self.free()
                        continue
                    step = (tn - t1) / N
                    ctx = P + N / 2  # mean context over the timed steps
                    byts = info["weight_bytes"] + B * ctx * info["kv_bytes_per_token"]
                    row[case] = {"batch": B, "prompt": P, "new_tokens": N, "step_s": step, "tok_s": B / step,
                                 "prefill_s": t1, "bytes_per_step": byts}
                    self.free()
            out[name] = row
            del model
            self.free()
        self.res["decode"] = out

    def rl(self):
        a = self.args
        name = list(self.shapes)[0]
        prompts, samples = (2, 2) if a.smoke else (32, 8)
        P, R, micro = (16, 16, 2) if a.smoke else (256, 256, 8)
        model, info = self.model(name)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=self.cuda)
        prompt = torch.randint(0, info["vocab"], (prompts, P), device=self.dev).repeat_interleave(samples, 0)
        n = prompt.shape[0]

        def logprobs(seqs):
            logits = model(input_ids=seqs).logits[:, P - 1:-1].float()
            return torch.log_softmax(logits, -1).gather(-1, seqs[:, P:].unsqueeze(-1)).squeeze(-1)

        def rl_step():
            ph = {}
            model.eval()
            with torch.no_grad():
                ph["gen"], seqs = self.wall(lambda: model.generate(
                    input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=R, min_new_tokens=R,
                    do_sample=True, temperature=1.0, top_p=1.0, top_k=0, pad_token_id=0, use_cache=True))
                ph["old_log_prob"], old = self.wall(lambda: torch.cat([logprobs(seqs[i:i + micro])
                                                                       for i in range(0, n, micro)]))
                ph["ref"], ref = self.wall(lambda: torch.cat([logprobs(seqs[i:i + micro])
                                                              for i in range(0, n, micro)]))
            reward = torch.randn(prompts, samples, device=self.dev)
            adv = ((reward - reward.mean(1, keepdim=True)) / (reward.std(1, keepdim=True) + 1e-6)).reshape(n, 1)
            model.train()

            def update():
                for i in range(0, n, micro):
                    lp = logprobs(seqs[i:i + micro])
                    ratio = torch.exp(lp - old[i:i + micro])
                    a_ = adv[i:i + micro]
                    pg = -torch.minimum(ratio * a_, ratio.clamp(0.8, 1.28) * a_).mean()
                    kl = (lp - ref[i:i + micro]).mean()
                    ((pg + 1e-3 * kl) * micro / n).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            ph["update_actor"], _ = self.wall(update)
            return ph

        rl_step()  # warm-up: allocator, kernels
        self.free()
        ph = rl_step()
        total = sum(ph.values())
        self.res["rl"] = {name: {"sequences": n, "prompt": P, "response": R, "micro_batch": micro,
                                 "phases_s": ph, "step_s": total, "tokens": n * (P + R),
                                 "throughput_tok_s": n * (P + R) / total}}
        del model, opt
        self.free()

    def free(self):
        if self.cuda:
            torch.cuda.empty_cache()


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) and not math.isnan(x) else "-"


def table(res, r1go):
    """Rows: what, r1go, r1go ratio, transformers, its ratio, r1go/transformers."""
    ce = res.get("ceilings", {})
    peak, bw = ce.get("matmul_bf16_tflops"), ce.get("copy_bytes_per_s")
    rows = []

    def get(d, *keys):
        for k in keys:
            if not isinstance(d, dict) or k not in d:
                return None
            d = d[k]
        return d

    def add(what, unit, hf, r1, bound, higher_better=True):
        ratio = lambda v: v / bound if v and bound else None
        speed = (r1 / hf if higher_better else hf / r1) if r1 and hf else None
        rows.append((what, unit, r1, ratio(r1), hf, ratio(hf), speed))

    for name, row in res.get("train", {}).items():
        f = row["flops_per_token"]
        mfu = lambda s: f * row["tokens"] / s / 1e12 if s else None
        r1 = get(r1go, "train", name, "step_s")
        add("train %s 4K tokens: TFLOP/s (ratio = MFU)" % name, "TF/s", mfu(row["step_s"]), mfu(r1), peak)
        if "packed4_step_s" in row:
            r1p = get(r1go, "train", name, "packed4_step_s")
            add("train %s 4x1K packed: TFLOP/s (MFU)" % name, "TF/s", mfu(row["packed4_step_s"]), mfu(r1p), peak)
    for name, row in res.get("decode", {}).items():
        for case in ("b1", "b256"):
            c = row.get(case)
            if not c:
                continue
            bound = c["batch"] / (c["bytes_per_step"] / bw) if bw else None
            what = "decode %s batch %d ctx %d: tok/s (ratio = of %s bound)" % (
                name, c["batch"], c["prompt"], "weight-read" if case == "b1" else "KV-read")
            add(what, "tok/s", c["tok_s"], get(r1go, "decode", name, case, "tok_s"), bound)
    for name, row in res.get("rl", {}).items():
        add("RL step %s, %d seqs x %d tok: tok/s (verl units)" % (name, row["sequences"], row["prompt"] + row["response"]),
            "tok/s", row["throughput_tok_s"], get(r1go, "rl", name, "throughput_tok_s"), None)
    print()
    print("ceilings (same run): matmul bf16 best %s TFLOP/s, device copy %s GB/s" % (
        fmt(peak, ".0f"), fmt(bw / 1e9 if bw else None, ".0f")))
    head = ("case", "r1go", "ratio", "transformers", "ratio", "r1go/transformers")
    print("%-64s %10s %7s %13s %7s %18s" % head)
    for what, unit, r1, r1r, hf, hfr, sp in rows:
        print("%-64s %10s %7s %13s %7s %18s" % (what, fmt(r1, ".1f"), fmt(r1r, ".3f"), fmt(hf, ".1f"),
                                                fmt(hfr, ".3f"), fmt(sp, ".2f")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="ceilings,train,decode,rl")
    ap.add_argument("--json", default="transformers_bench.json", help="where the JSON results go")
    ap.add_argument("--r1go", help="r1go's results in the same layout, to print beside transformers")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, to check the script anywhere")
    ap.add_argument("--budget-s", type=float, default=540, help="skip the sections left after this many seconds")
    args = ap.parse_args()
    if args.device == "cpu" and not args.smoke:
        sys.exit("transformers_bench: no GPU; use --smoke to check the script on the CPU")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    b = Bench(args)
    print("torch %s, transformers %s, device %s" % (torch.__version__, transformers.__version__, b.res["device"]),
          flush=True)
    for sec in args.sections.split(","):
        if time.time() - b.t0 > args.budget_s:
            b.res["errors"][sec] = "skipped: time budget of %.0f s spent" % args.budget_s
            continue
        s = time.time()
        try:
            getattr(b, sec)()
        except Exception as e:  # record and go on: one broken section must not lose the others
            traceback.print_exc()
            b.res["errors"][sec] = repr(e)[:500]
            b.free()
        print("section %s: %.1f s" % (sec, time.time() - s), flush=True)
        with open(args.json, "w") as f:  # after every section, so a timeout keeps what ran
            json.dump(b.res, f, indent=1)
    r1go = {}
    if args.r1go:
        with open(args.r1go) as f:
            r1go = json.load(f)
    table(b.res, r1go)
    if b.res["errors"]:
        print("errors: %s" % json.dumps(b.res["errors"]))
    sys.exit(1 if b.res["errors"] else 0)


if __name__ == "__main__":
    main()
