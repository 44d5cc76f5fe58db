#!/usr/bin/env python3
"""Reads r1go's TensorBoard event files with the tensorboard package and
checks every scalar against the JSONL metrics file of the same run.

rl/metrics writes both sinks from the same Log calls: metrics.jsonl holds
{"step": N, "data": {name: value}} per line (NaN and ±Inf as the strings
"NaN", "Infinity", "-Infinity"), and the event file one simple_value
summary per metric and step, stored as float32 as TensorFlow does. This
script loads the event folder with TensorBoard's own EventAccumulator (all
scalars kept: size_guidance 0) and requires
  - the same set of tags as metric names in the JSONL file,
  - for each tag, the same steps in the same order,
  - each value equal to float32(JSONL value), NaN matching NaN,
  - wall times that never go backwards.

A run to check comes from TestMetricsRunForTensorBoard
(benchmarks/gpu/tbrun_test.go) with R1GO_METRICS_DIR set, or from any
r1go training run folder.

Usage:
    python3 benchmarks/gpu/tb_readback.py RUN_DIR [--events DIR] [--jsonl FILE]
(defaults: RUN_DIR/tensorboard and RUN_DIR/metrics.jsonl). Exit status 1 on
any difference; a summary line is printed last.
"""
import argparse
import json
import math
import os
import sys

try:
    import numpy as np
    import tensorboard
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:
    sys.exit("tb_readback: %s; run this where the tensorboard package is installed (the GPU machine), "
             "see benchmarks/gpu/README.md" % e)

SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def read_jsonl(path):
    """{tag: [(step, value)]} in file order."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                step, data = int(rec["step"]), rec["data"]
            except (ValueError, KeyError, TypeError) as e:
                sys.exit("tb_readback: %s:%d: %s" % (path, n, e))
            for k, v in data.items():
                if isinstance(v, str):
                    if v not in SPECIAL:
                        sys.exit("tb_readback: %s:%d: %s: string value %r" % (path, n, k, v))
                    v = SPECIAL[v]
                out.setdefault(k, []).append((step, float(v)))
    return out


def same(got, want):
    w = float(np.float32(want))
    if math.isnan(w):
        return math.isnan(got)
    return got == w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--events", help="event file folder (default RUN_DIR/tensorboard)")
    ap.add_argument("--jsonl", help="metrics file (default RUN_DIR/metrics.jsonl)")
    args = ap.parse_args()
    events = args.events or os.path.join(args.run_dir, "tensorboard")
    jsonl = args.jsonl or os.path.join(args.run_dir, "metrics.jsonl")
    files = [f for f in os.listdir(events) if "tfevents" in f]
    if not files:
        sys.exit("tb_readback: %s holds no event file" % events)
    want = read_jsonl(jsonl)
    with np.errstate(over="ignore"):  # float32() of a huge float64 is inf, as in r1go's writer
        acc = event_accumulator.EventAccumulator(events, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        problems = []
        for t in sorted(tags - set(want)):
            problems.append("tag %s is in the event file but not in %s" % (t, jsonl))
        for t in sorted(set(want) - tags):
            problems.append("metric %s is in %s but not in the event file" % (t, jsonl))
        checked = 0
        for t in sorted(tags & set(want)):
            evs = acc.Scalars(t)
            exp = want[t]
            if [e.step for e in evs] != [s for s, _ in exp]:
                problems.append("%s: steps %s, JSONL has %s" % (t, [e.step for e in evs][:10], [s for s, _ in exp][:10]))
                continue
            for e, (s, v) in zip(evs, exp):
                checked += 1
                if not same(e.value, v):
                    problems.append("%s step %d: event value %r, float32 of the JSONL value %r is %r"
                                    % (t, s, e.value, v, float(np.float32(v))))
        walls = sorted((e.step, e.wall_time) for t in tags for e in acc.Scalars(t))
        for (s0, w0), (s1, w1) in zip(walls, walls[1:]):
            if s1 > s0 and w1 < w0:
                problems.append("wall time goes back from step %d (%f) to step %d (%f)" % (s0, w0, s1, w1))
                break
    for p in problems[:30]:
        print("FAIL", p)
    print("tensorboard %s: %s: %d tags, %d scalars checked against %s: %s"
          % (tensorboard.__version__, ", ".join(sorted(files)), len(tags), checked, os.path.basename(jsonl),
             "all equal" if not problems else "%d differences" % len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
