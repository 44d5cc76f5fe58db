#!/usr/bin/env python3
"""Reference console lines for r1go's console sink, made with Python itself.

verl's console logger prints `step:N - key:value - ...` with pprint.pformat
of each number, which for a float is repr(). r1go sorts the keys and prints
integral values as integers (as verl prints Python ints such as token
counts). This script applies that rule with Python's own repr and writes
console_golden.json: for each case the step, the values as float.hex()
strings (exact, NaN and Inf included) and the expected line.

Usage: python3 console_ref.py > console_golden.json
"""

import json
import math
import pprint


def fmt(x):
    if math.isfinite(x) and x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return pprint.pformat(x)  # repr(x) for a float, as verl prints it


def line(step, values):
    parts = ["step:%d" % step]
    for k in sorted(values):
        parts.append("%s:%s" % (k, fmt(values[k])))
    return " - ".join(parts)


CASES = [
    (0, {}),
    (1, {"critic/score/mean": 0.25, "actor/entropy": 0.4375, "timing_s/gen": 3.1}),
    (2, {"a": 0.1 + 0.2, "b": 1.0 / 3, "c": -2.5, "d": 2.0 / 3}),
    (3, {"small/1": 1e-05, "small/2": 0.0001, "small/3": 0.00012345, "small/4": 5e-324,
         "small/5": -3.0e-7, "small/6": 0.001}),
    (4, {"big/1": 1e16, "big/2": 1.5e16, "big/3": float(2 ** 53), "big/4": 1e22,
         "big/5": 123456789.123, "big/6": 1e15 + 0.5, "big/7": 9999999999999998.0,
         "big/8": 1.7976931348623157e308, "big/9": 1234567890123456.7}),
    (5, {"int/0": 0.0, "int/neg0": -0.0, "int/1": 1.0, "int/-7": -7.0,
         "perf/total_num_tokens": 123456.0}),
    (6, {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}),
    (123456, {"val-core/hotpotqa/reward/mean@1": 0.41, "key with space": 2.0 ** -20,
              "ünïcode/ß": 6.02214076e23}),
]

out = []
for step, values in CASES:
    out.append({
        "step": step,
        "values": {k: v.hex() for k, v in values.items()},
        "line": line(step, values),
    })
print(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False))
