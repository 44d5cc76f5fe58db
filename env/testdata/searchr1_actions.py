#!/usr/bin/env python3
"""Writes searchr1_actions.json: what Search-R1's own code does with model turns.

The three functions below are Search-R1's logic (search_r1/llm_agent/generation.py,
_postprocess_responses and postprocess_predictions; verl/utils/reward_score/qa_em.py,
extract_solution) restated from reference/formats.md §3.11 and §4, run by Python's re
module so the Go port (env/searchr1.go) is checked against the real regex engine,
backreference and all.

Run from this folder: /usr/bin/python3 searchr1_actions.py
"""
import json
import re


def cut(resp):
    if '</search>' in resp:
        return resp.split('</search>')[0] + '</search>'
    if '</answer>' in resp:
        return resp.split('</answer>')[0] + '</answer>'
    return resp


def action(pred):
    m = re.search(r'<(search|answer)>(.*?)</\1>', pred, re.DOTALL)
    if m:
        return m.group(1), m.group(2).strip()
    return '', ''


def extract(text):
    ms = list(re.finditer(r'<answer>(.*?)</answer>', text, re.DOTALL))
    if len(ms) <= 1:
        return None
    return ms[-1].group(1).strip()


turns = [
    "<think>I need the capital.</think>\n<search> capital of France </search>",
    "<search> a </answer> b </search>",
    "<answer> Paris </answer> and <search> more </search>",
    "<search>open only",
    "<answer>\n multi\nline </answer>",
    "<search></search>",
    "<search> x </answer>",
    "<search> x </answer> <answer> y </answer>",
    "<<search>q</search>",
    "no action at all",
    "<answer> A </answer><answer> B </answer>",
    "<search> q1 </search> trailing <answer> late </answer>",
    "<SEARCH> upper </SEARCH>",
    "<search> \u00e9t\u00e9 \u3000</search>",
    "",
]
texts = [
    "For example, <answer> Beijing </answer>. Question: q\n<answer> Paris </answer>",
    "For example, <answer> Beijing </answer>. Question: q\n",
    "<answer>a</answer><answer> b </answer><answer>\nc\n</answer>",
    "no answers",
]
out = {
    "turns": [{"turn": t, "cut": cut(t), "action": action(cut(t))[0], "content": action(cut(t))[1],
               "raw_action": action(t)[0], "raw_content": action(t)[1]} for t in turns],
    "texts": [{"text": t, "answer": extract(t)} for t in texts],
}
with open('searchr1_actions.json', 'w') as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
