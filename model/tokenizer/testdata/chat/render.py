"""Reference renders of the chat templates with Python jinja2, configured
as transformers' apply_chat_template configures it (chat_template_utils):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False, ...),
globals raise_exception and strftime_now, the special tokens map passed as
variables. Writes conversations.json (the inputs) and rendered.json.
Run from this folder: python3 render.py (Debian python3-jinja2).
"""
import json
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

SEARCH = {"type": "function", "function": {
    "name": "search",
    "description": "Search Wikipedia for a query & return the top <k> passages.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "what to look up"},
        "k": {"type": "integer", "description": "how many passages", "default": 3},
    }, "required": ["query"]},
}}
CALC = {"type": "function", "function": {
    "name": "calculator",
    "description": "Évalue une expression arithmétique — 计算器 🧮",
    "parameters": {"type": "object", "properties": {
        "expression": {"type": "string"},
        "precision": {"type": "number", "enum": [0.5, 1, 1e-07, 1e+20]},
        "strict": {"type": "boolean", "default": None},
    }, "required": ["expression", "precision"]},
}}


def call(name, arguments, **extra):
    c = dict(extra)
    c["type"] = "function"
    c["function"] = {"name": name, "arguments": arguments}
    return c


def msg(role, content, tool_calls=None, name=None, tool_call_id=None):
    m = {"role": role, "content": content}
    if tool_calls:
        m["tool_calls"] = tool_calls
    if name:
        m["name"] = name
    if tool_call_id:
        m["tool_call_id"] = tool_call_id
    return m


conversations = [
    {"name": "user only", "messages": [msg("user", "What is the capital of France?")], "tools": None, "add_generation_prompt": True},
    {"name": "system and user", "messages": [msg("system", "You are terse."), msg("user", "Hi")], "tools": None, "add_generation_prompt": True},
    {"name": "formats layout", "messages": [
        msg("system", "S"), msg("user", "Q"),
        msg("assistant", "", [call("search", {"query": "q"})]),
        msg("tool", "R"), msg("assistant", "A")], "tools": [SEARCH], "add_generation_prompt": False},
    {"name": "multi-turn tools", "messages": [
        msg("user", "Who directed the film that won Best Picture in 1998? Answer in 中文."),
        msg("assistant", "<think>\nI need two searches.\n</think>", [
            call("search", {"query": "Best Picture 1998", "k": 2}),
            call("search", {"k": 1, "query": "Titanic (1997) director \"James\" \\ Cameron"}),
        ]),
        msg("tool", "Titanic won Best Picture at the 70th Academy Awards (1998).", name="search", tool_call_id="c1"),
        msg("tool", "Titanic was directed by James Cameron.\nIt runs 195 minutes.", name="search", tool_call_id="c2"),
        msg("assistant", "詹姆斯·卡梅隆 (James Cameron) 🎬"),
        msg("user", "And compute 2**10 with calculator, please."),
        msg("assistant", "", [call("calculator", {"expression": "2**10", "precision": 1.0, "strict": True,
                                                  "nested": {"list": [1, 2.5, None, False, "ü"], "empty": {}, "none": []},
                                                  "big": 12345678901234567890, "small": 1e-07, "huge": 1e20})]),
        msg("tool", "1024"),
        msg("assistant", "2**10 = 1024"),
    ], "tools": [SEARCH, CALC], "add_generation_prompt": True},
    {"name": "string arguments", "messages": [
        msg("user", "weather?"),
        msg("assistant", "Let me check.", [call("search", "{\"query\": \"weather <today> & tomorrow\"}", id="call_0")]),
        msg("tool", "Sunny, 25°C"),
    ], "tools": [SEARCH], "add_generation_prompt": True},
    {"name": "mid system", "messages": [
        msg("user", "a"), msg("assistant", "b"), msg("system", "Now answer in French."), msg("user", "c"),
    ], "tools": None, "add_generation_prompt": True},
    {"name": "system with tools", "messages": [
        msg("system", "Tu es un assistant.\n\tIndented line."), msg("user", "  spaces  \n\n"),
    ], "tools": [CALC], "add_generation_prompt": False},
    {"name": "empty tools list", "messages": [msg("user", "x")], "tools": [], "add_generation_prompt": True},
    {"name": "ends with tool", "messages": [
        msg("user", "q"), msg("assistant", "", [call("search", {"query": "a"}), call("search", {"query": "b"})]),
        msg("tool", "ra"), msg("tool", "rb"),
    ], "tools": [SEARCH], "add_generation_prompt": True},
    {"name": "unknown role", "messages": [msg("user", "q"), msg("critic", "bad")], "tools": None, "add_generation_prompt": True},
]

special = {
    "qwen2": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|end_of_text|>"},
}

rendered = {}
for folder, tokens in special.items():
    cfg = json.load(open(f"../{folder}/tokenizer_config.json", encoding="utf-8"))
    tokens = dict(tokens, additional_special_tokens=cfg["additional_special_tokens"])
    template = env.from_string(open(f"../{folder}/chat_template.jinja", encoding="utf-8").read())
    rendered[folder] = []
    for conv in conversations:
        try:
            text = template.render(messages=conv["messages"], tools=conv["tools"],
                                   add_generation_prompt=conv["add_generation_prompt"], **tokens)
            rendered[folder].append({"text": text})
        except jinja2.exceptions.TemplateError as e:
            rendered[folder].append({"error": str(e)})

# The constructs template on its own, with the Qwen2-style special tokens.
template = env.from_string(open("constructs.jinja", encoding="utf-8").read())
rendered["constructs"] = []
for conv in conversations:
    try:
        text = template.render(messages=conv["messages"], tools=conv["tools"],
                               add_generation_prompt=conv["add_generation_prompt"], **special["qwen2"])
        rendered["constructs"].append({"text": text})
    except jinja2.exceptions.TemplateError as e:
        rendered["constructs"].append({"error": str(e)})

json.dump(conversations, open("conversations.json", "w", encoding="utf-8"), ensure_ascii=False, indent=1)
json.dump(rendered, open("rendered.json", "w", encoding="utf-8"), ensure_ascii=False, indent=1)
print("jinja2", jinja2.__version__, {k: len(v) for k, v in rendered.items()})
