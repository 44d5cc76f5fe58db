#!/usr/bin/env python3
"""Independent BM25 scores for env's index test, computed with numpy.

Run from this folder: /usr/bin/python3 bm25_numpy.py > bm25_numpy.json
It indexes ../../data/testdata/corpus_wiki18.jsonl (the "contents" field)
with the analyzer the Go test selects (lowercase, letters and digits,
possessive 's dropped, Lucene's English stop words, no stemming) and scores
every passage with Robertson's BM25 and Lucene's idf, as dense matrices.
"""
import json
import re
import sys

import numpy as np

STOP = set("a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split())
K1, B = 0.9, 0.4
QUERIES = [
    "Where was Marie Curie born?",
    "largest subglacial lake in Antarctica",
    "Nobel Prize in Physics 1903",
    "capital of Poland Warsaw Warsaw",
    "Genentech lobbyist Washington",
    "river near the village",
    "zebra",
]


def analyze(text):
    text = re.sub(r"['\u2019][sS](?![^\W_])", " ", text)
    toks = re.findall(r"[^\W_]+", text.lower())
    return [t for t in toks if t not in STOP]


def main():
    docs = [json.loads(l)["contents"] for l in open("../../data/testdata/corpus_wiki18.jsonl", encoding="utf-8")]
    toks = [analyze(d) for d in docs]
    vocab = sorted({t for ts in toks for t in ts})
    col = {t: i for i, t in enumerate(vocab)}
    tf = np.zeros((len(docs), len(vocab)))
    for d, ts in enumerate(toks):
        for t in ts:
            tf[d, col[t]] += 1
    dl = tf.sum(axis=1)
    n = len(docs)
    df = (tf > 0).sum(axis=0)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    norm = K1 * (1 - B + B * dl / dl.mean())
    w = tf * (K1 + 1) / (tf + norm[:, None])
    out = {"k1": K1, "b": B, "queries": []}
    for q in QUERIES:
        qv = np.zeros(len(vocab))
        for t in analyze(q):
            if t in col:
                qv[col[t]] += 1
        s = w @ (qv * idf)
        order = sorted(range(n), key=lambda d: (-s[d], d))
        out["queries"].append({"query": q, "hits": [[d, float(s[d])] for d in order if s[d] > 0][:5]})
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


main()
