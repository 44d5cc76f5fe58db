#!/usr/bin/env python3
"""Golden answers for env's normalisation, EM, F1, cover EM and rewards.

Run from this folder: python3 qa_golden.py > qa_golden.json
The functions below restate, in plain Python, the SQuAD/HotpotQA evaluator
(normalize_answer, f1) and Agent-R1 legacy's qa_em_and_format rules, so that
Python's own str.lower, str.split and re's Unicode \\b decide the tricky
cases. The Go code must reproduce every number.
"""
import json
import re
import string
import sys
from collections import Counter


def normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def em(pred, golds):
    p = normalize(pred)
    return float(any(normalize(g) == p for g in golds))


def cover_em(pred, golds):
    p = normalize(pred)
    return float(any(normalize(g) in p for g in golds))


def f1_one(pred, gold):
    p, g = normalize(pred), normalize(gold)
    special = ("yes", "no", "noanswer")
    if (p in special or g in special) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    same = sum((Counter(pt) & Counter(gt)).values())
    if same == 0:
        return 0.0
    prec, rec = same / len(pt), same / len(gt)
    return 2 * prec * rec / (prec + rec)


def f1(pred, golds):
    return max(f1_one(pred, g) for g in golds)


BLOCK = re.compile(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", re.DOTALL)


def first_answer(block):
    m = re.search(r"<answer>(.*?)</answer>", block, re.DOTALL)
    return m.group(1).strip() if m else None


def format_score(text):
    blocks = BLOCK.findall(text)
    if not blocks:
        return 0.0
    score = 0.0
    for b in blocks[:-1]:
        if all(b.count(t) == 1 for t in ("<think>", "</think>", "<tool_call>", "</tool_call>")):
            if re.search(r"^<think>(.*?)</think>(.*?)<tool_call>(.*?)</tool_call>$", b, re.DOTALL):
                score += 0.5
    if re.search(r"^<think>(.*?)</think>(.*?)<answer>(.*?)</answer>$", blocks[-1], re.DOTALL):
        score += 0.5
    return score


def answer_score(text, golds):
    blocks = BLOCK.findall(text)
    if not blocks:
        return 0.0
    last = blocks[-1]
    a = first_answer(last)
    r = 0.0
    if a is not None and cover_em(a, golds):
        r = 1.0
    if r == 0.0 and cover_em(last, golds):
        r = 0.2
    return r


def agent_r1(text, golds):
    fmt = min(format_score(text), 1.0)
    ans = answer_score(text, golds)
    return -1.0 + fmt + ans if fmt >= 0.5 else -1.0 + fmt


def acc(text, golds):
    blocks = BLOCK.findall(text)
    if not blocks:
        return 0.0
    a = first_answer(blocks[-1])
    return 0.0 if a is None else cover_em(a, golds)


def paper_eq6(text, golds):
    # r_format = mean of two indicators: the final block presents the answer
    # (think/answer pattern) and every earlier block is a valid tool call
    # (think/tool_call pattern; true when there is none). r = EM if r_format
    # is 1, else r_format - 1.
    blocks = BLOCK.findall(text)
    if not blocks:
        return -1.0
    fa = 1.0 if re.search(r"^<think>(.*?)</think>(.*?)<answer>(.*?)</answer>$", blocks[-1], re.DOTALL) else 0.0
    ft = 1.0
    for b in blocks[:-1]:
        ok = all(b.count(t) == 1 for t in ("<think>", "</think>", "<tool_call>", "</tool_call>")) and \
            re.search(r"^<think>(.*?)</think>(.*?)<tool_call>(.*?)</tool_call>$", b, re.DOTALL)
        if not ok:
            ft = 0.0
    rf = (fa + ft) / 2
    if rf == 1.0:
        a = first_answer(blocks[-1])
        return em(a, golds)
    return rf - 1.0


def search_r1_em(text, golds):
    ms = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    if len(ms) <= 1:
        return 0.0
    return em(ms[-1].strip(), golds)


NORMALISE = [
    "The Eiffel Tower", "  a  quick\tbrown\nfox ", "An apple a day", "theatre the", "anthem",
    "éthe", "the éthe", "Éthe the", "İstanbul", "İthe", "ΣΑΣ", "ΟΔΟΣ the", "naïve—the café",
    "a\x1cb\x1dc\x1ed\x1ff", "x\u00a0the\u2003y", "x\u200bthe", "\u0085the\u0085", "_the_", "the_", "2the",
    "the²", "Ⅻthe", "don't", "U.S.A.", "¿Qué?", "«the»", "“The” end", "Straße", "ǅthe", "K the", "THE A AN",
    "", "   ", "!!!", "the", "a an the", "ﬁthe", "x\u0301the", "ⓐthe", "the\u0300",
]

PAIRS = [
    ("The Eiffel Tower", ["Eiffel Tower"]),
    ("Eiffel", ["The Eiffel Tower"]),
    ("in Paris, France", ["Paris"]),
    ("yes", ["no"]),
    ("yes", ["yes"]),
    ("no answer", ["noanswer"]),
    ("noanswer", ["noanswer"]),
    ("the the the", ["the"]),
    ("Paris Paris London", ["Paris London London"]),
    ("", ["Paris"]),
    ("İstanbul", ["i̇stanbul"]),
    ("istanbul", ["İstanbul"]),
    ("éthe", ["é"]),
    ("a\x1cb", ["a b"]),
    ("1,000", ["1000"]),
    ("Marie Curie", ["Curie", "Pierre Curie", "Maria Skłodowska"]),
    ("ΣΑΣ", ["σας"]),
]

TH = "<|im_start|>assistant\n"
END = "<|im_end|>"
TOOL = "\n<|im_start|>user\n<tool_response>\nr\n</tool_response>" + END + "\n"
CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "q"}}\n</tool_call>'

TRAJ = [
    ("perfect", TH + "<think>x</think>\n" + CALL + END + TOOL + TH + "<think>\ny</think>\n<answer>Paris</answer>" + END, ["Paris"]),
    ("perfect-wrong", TH + "<think>x</think>" + CALL + END + TOOL + TH + "<think>y</think><answer>Lyon</answer>" + END, ["Paris"]),
    ("partial-credit", TH + "<think>x</think>" + CALL + END + TOOL + TH + "<think>Paris maybe</think><answer>Lyon</answer>" + END, ["Paris"]),
    ("no-tool", TH + "<think>y</think><answer>the Paris</answer>" + END, ["Paris"]),
    ("cover", TH + "<think>y</think><answer>Paris, France</answer>" + END, ["Paris"]),
    ("trailing-newline", TH + "<think>x</think>" + CALL + "\n" + END + TOOL + TH + "<think>y</think><answer>Paris</answer>\n" + END, ["Paris"]),
    ("two-newlines", TH + "<think>y</think><answer>Paris</answer>\n\n" + END, ["Paris"]),
    ("two-calls", TH + "<think>x</think>" + CALL + CALL + END + TOOL + TH + "<think>y</think><answer>Paris</answer>" + END, ["Paris"]),
    ("no-think", TH + CALL + END + TOOL + TH + "<answer>Paris</answer>" + END, ["Paris"]),
    ("text-before-think", TH + "ok <think>x</think>" + CALL + END + TOOL + TH + "<think>y</think><answer>Paris</answer>" + END, ["Paris"]),
    ("three-tools", (TH + "<think>x</think>" + CALL + END + TOOL) * 3 + TH + "<think>y</think><answer>Paris</answer>" + END, ["Paris"]),
    ("unterminated", TH + "<think>x</think>" + CALL + END + TOOL + TH + "<think>y</think><answer>Paris</answer>", ["Paris"]),
    ("empty", "", ["Paris"]),
    ("two-answers", TH + "<think>y</think><answer>Lyon</answer> <answer>Paris</answer>" + END, ["Paris"]),
    ("multi-gold", TH + "<think>y</think><answer>Maria Skłodowska-Curie</answer>" + END, ["Marie Curie", "Maria Skłodowska-Curie"]),
    ("prompt-example", "<answer> Beijing </answer> question" + TH + "<think>y</think><answer>Paris</answer>" + END, ["Paris"]),
]


def main():
    out = {
        "normalise": [{"in": s, "out": normalize(s)} for s in NORMALISE],
        "pairs": [{"pred": p, "golds": g, "em": em(p, g), "cover_em": cover_em(p, g), "f1": f1(p, g)} for p, g in PAIRS],
        "trajectories": [{
            "name": n, "text": t, "golds": g, "format": format_score(t), "answer": answer_score(t, g),
            "agent_r1": agent_r1(t, g), "acc": acc(t, g), "paper": paper_eq6(t, g), "search_r1_em": search_r1_em(t, g),
        } for n, t, g in TRAJ],
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
