"""Reference renders of chat_template.jinja (a Qwen3-style template) with
Python jinja2 as transformers configures it (trim_blocks, lstrip_blocks),
for several chat-template keyword arguments. Writes rendered.json.
Run from this folder: /usr/bin/python3 render.py
"""
import json

from jinja2.sandbox import ImmutableSandboxedEnvironment

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
tmpl = env.from_string(open("chat_template.jinja").read())
messages = [
    {"role": "user", "content": "Who wrote Dune?"},
    {"role": "assistant", "content": "<think>\nRecall it.\n</think>\n\nFrank Herbert."},
    {"role": "user", "content": "When?"},
]
cases = []
for kwargs in [{}, {"enable_thinking": False}, {"enable_thinking": True}]:
    for gen in [True, False]:
        text = tmpl.render(messages=messages, tools=None, add_generation_prompt=gen, **kwargs)
        cases.append({"kwargs": kwargs, "add_generation_prompt": gen, "text": text})
with open("rendered.json", "w") as f:
    json.dump({"messages": messages, "cases": cases}, f, indent=1, ensure_ascii=False)
    f.write("\n")
