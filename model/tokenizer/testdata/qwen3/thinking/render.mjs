// Reference renders of chat_template.jinja (a Qwen3 template with thinking)
// by @huggingface/transformers: apply_chat_template(messages, {tools,
// add_generation_prompt, tokenize: false, ...kwargs}) on the qwen2 fixture
// tokenizer, the messages passed as they are, reasoning_content included.
// Writes chats.json (the inputs) and rendered.json (one {name, text} or
// {name, error} per chat).
// Run from this folder: npm ci --ignore-scripts && node render.mjs
import { AutoTokenizer, env } from "@huggingface/transformers";
import fs from "node:fs";
import path from "node:path";

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = "";

const here = path.dirname(new URL(import.meta.url).pathname);
const template = fs.readFileSync(path.join(here, "chat_template.jinja"), "utf8");
const tok = await AutoTokenizer.from_pretrained(path.join(here, "..", "..", "qwen2"));

const SEARCH = {
  type: "function",
  function: {
    name: "search",
    description: "Search Wikipedia for a query & return the top passages.",
    parameters: { type: "object", properties: { query: { type: "string", description: "what to look up" } }, required: ["query"] },
  },
};
const LOOKUP = {
  type: "function",
  function: { name: "lookup", description: "Find a term in the last passages — 查找", parameters: { type: "object", properties: { term: { type: "string" } }, required: ["term"] } },
};

const user = (content) => ({ role: "user", content });
const system = (content) => ({ role: "system", content });
const tool = (content, name = "search") => ({ role: "tool", content, name, tool_call_id: "call_0" });
const assistant = (content, extra = {}) => ({ role: "assistant", content, ...extra });
const call = (name, args) => ({ id: "call_0", type: "function", function: { name, arguments: args } });
const search = (query) => call("search", { query });

const Q = "Who wrote Dune, and when was it published?";
const chats = [
  { name: "user only", messages: [user(Q)], add_generation_prompt: true },
  { name: "user only without generation prompt", messages: [user(Q)] },
  { name: "system and user", messages: [system("You are a careful researcher."), user(Q)], add_generation_prompt: true },
  { name: "system only", messages: [system("You are a careful researcher.")], add_generation_prompt: true },
  { name: "no messages", messages: [], add_generation_prompt: true },
  { name: "answer with reasoning_content", messages: [user(Q), assistant("Frank Herbert, in 1965.", { reasoning_content: "Dune is Frank Herbert's novel; it came out in 1965." })] },
  { name: "reasoning_content with outer newlines", messages: [user(Q), assistant("\n\nFrank Herbert.", { reasoning_content: "\n\nLet me recall.\n\n" })] },
  { name: "reasoning inside the content", messages: [user(Q), assistant("<think>\nRecall it.\n</think>\n\nFrank Herbert.")] },
  { name: "reasoning_content beside a think block", messages: [user(Q), assistant("<think>\nold\n</think>\n\nFrank Herbert.", { reasoning_content: "new" })] },
  { name: "empty reasoning_content", messages: [user(Q), assistant("Frank Herbert.", { reasoning_content: "" })] },
  { name: "null reasoning_content", messages: [user(Q), assistant("<think>\nRecall it.\n</think>\n\nFrank Herbert.", { reasoning_content: null })] },
  { name: "newlines only reasoning_content", messages: [user(Q), assistant("Frank Herbert.", { reasoning_content: "\n\n" })] },
  { name: "last answer without reasoning", messages: [user(Q), assistant("Frank Herbert.")] },
  { name: "unclosed think in content", messages: [user(Q), assistant("<think>\nunfinished")] },
  { name: "reasoning before the last query", messages: [user(Q), assistant("Frank Herbert.", { reasoning_content: "Recall it." }), user("And its sequel?")], add_generation_prompt: true },
  { name: "think block before the last query", messages: [user(Q), assistant("<think>Recall it.</think>Frank Herbert."), user("And its sequel?")], add_generation_prompt: true },
  {
    name: "reasoning on every turn",
    messages: [user("First?"), assistant("One.", { reasoning_content: "r1" }), user("Second?"), assistant("Two.", { reasoning_content: "r2" }), user("Third?"), assistant("Three.", { reasoning_content: "r3" })],
  },
  {
    name: "tool call with reasoning",
    messages: [system("Answer with the search tool."), user(Q), assistant("", { reasoning_content: "I should search for Dune.", tool_calls: [search("Dune novel author")] }), tool("Dune is a 1965 novel by Frank Herbert.")],
    tools: [SEARCH],
    add_generation_prompt: true,
  },
  {
    name: "tool loop with reasoning each turn",
    messages: [
      user(Q),
      assistant("", { reasoning_content: "Search the novel first.", tool_calls: [search("Dune novel")] }),
      tool("Dune is a novel by Frank Herbert."),
      assistant("", { reasoning_content: "Now the year.", tool_calls: [search("Dune publication year")] }),
      tool("Dune was published in 1965."),
      assistant("Frank Herbert, in 1965.", { reasoning_content: "Both facts are found." }),
    ],
    tools: [SEARCH],
  },
  {
    name: "tool call without reasoning mid-loop",
    messages: [user(Q), assistant("", { tool_calls: [search("Dune")] }), tool("Dune is a novel by Frank Herbert."), assistant("Frank Herbert.")],
    tools: [SEARCH],
  },
  { name: "tool call after content", messages: [user(Q), assistant("I will search.", { tool_calls: [search("Dune")] })], tools: [SEARCH] },
  { name: "two tool calls", messages: [user(Q), assistant("", { tool_calls: [search("Dune"), call("lookup", { term: "1965" })] })], tools: [SEARCH, LOOKUP] },
  { name: "string arguments", messages: [user(Q), assistant("", { tool_calls: [call("search", '{"query": "Dune"}')] }), tool("Frank Herbert.")], tools: [SEARCH], add_generation_prompt: true },
  { name: "null content with calls", messages: [user(Q), assistant(null, { reasoning_content: "Search.", tool_calls: [search("Dune")] })], tools: [SEARCH] },
  {
    name: "parallel tool results",
    messages: [user(Q), assistant("", { tool_calls: [search("Dune"), search("Frank Herbert")] }), tool("Dune is a novel."), tool("Frank Herbert wrote Dune.")],
    tools: [SEARCH],
    add_generation_prompt: true,
  },
  {
    name: "reasoning after two tool results",
    messages: [system("Be brief."), user(Q), assistant("", { tool_calls: [search("Dune"), search("1965")] }), tool("A novel."), tool("A year."), assistant("Frank Herbert, 1965.", { reasoning_content: "Enough." })],
    tools: [SEARCH],
  },
  {
    name: "user turn holding tool responses",
    messages: [user(Q), assistant("c1", { reasoning_content: "a1" }), user("<tool_response>\nDune is a novel.\n</tool_response>"), assistant("c2", { reasoning_content: "a2" })],
  },
  { name: "system with tools", messages: [system("You are a careful researcher."), user(Q)], tools: [SEARCH, LOOKUP], add_generation_prompt: true },
  { name: "system mid conversation", messages: [system("S1"), user("Q1"), system("S2"), user("Q2")], add_generation_prompt: true },
  { name: "enable_thinking false", messages: [user(Q)], add_generation_prompt: true, kwargs: { enable_thinking: false } },
  { name: "enable_thinking false without generation prompt", messages: [user(Q)], kwargs: { enable_thinking: false } },
  { name: "enable_thinking true", messages: [user(Q)], add_generation_prompt: true, kwargs: { enable_thinking: true } },
  { name: "enable_thinking false with tools", messages: [user(Q)], tools: [SEARCH], add_generation_prompt: true, kwargs: { enable_thinking: false } },
  {
    name: "enable_thinking false after reasoning",
    messages: [user(Q), assistant("Frank Herbert.", { reasoning_content: "Recall it." }), user("And the year?")],
    add_generation_prompt: true,
    kwargs: { enable_thinking: false },
  },
  {
    name: "enable_thinking false in a tool loop",
    messages: [user(Q), assistant("", { reasoning_content: "Search it.", tool_calls: [search("Dune")] }), tool("Frank Herbert, 1965.")],
    tools: [SEARCH],
    add_generation_prompt: true,
    kwargs: { enable_thinking: false },
  },
  { name: "unknown keyword argument", messages: [user(Q)], add_generation_prompt: true, kwargs: { custom_flag: true } },
  { name: "unicode", messages: [user("《沙丘》的作者是谁？ 🏜️"), assistant("弗兰克·赫伯特。", { reasoning_content: "《沙丘》— Frank Herbert, 1965 ✓" })] },
  {
    name: "multi-paragraph reasoning",
    messages: [user(Q), assistant("Frank Herbert, 1965.", { reasoning_content: "First, the author.\n\nThen the year:\n- 1965\n- serialised earlier" })],
  },
  { name: "tool message first", messages: [tool("orphan result"), user(Q)], add_generation_prompt: true },
  {
    name: "reasoning_content on a tool turn before the query",
    messages: [user("Q1"), assistant("", { reasoning_content: "search", tool_calls: [search("x")] }), tool("R"), assistant("A1"), user("Q2")],
    tools: [SEARCH],
    add_generation_prompt: true,
    kwargs: { enable_thinking: true },
  },
];

const rendered = chats.map((c) => {
  try {
    const text = tok.apply_chat_template(c.messages, {
      chat_template: template,
      tools: c.tools ?? null,
      add_generation_prompt: c.add_generation_prompt ?? false,
      tokenize: false,
      ...(c.kwargs ?? {}),
    });
    return { name: c.name, text };
  } catch (e) {
    return { name: c.name, error: String(e.message ?? e) };
  }
});
const inputs = chats.map((c) => ({ name: c.name, messages: c.messages, tools: c.tools ?? null, add_generation_prompt: c.add_generation_prompt ?? false, kwargs: c.kwargs ?? null }));
fs.writeFileSync(path.join(here, "chats.json"), JSON.stringify(inputs, null, 1) + "\n");
fs.writeFileSync(path.join(here, "rendered.json"), JSON.stringify(rendered, null, 1) + "\n");
console.log(`${chats.length} chats rendered, ${rendered.filter((r) => r.error).length} errors`);
