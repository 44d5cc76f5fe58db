// The Node.js side of the tokenizer benchmark. Encodes every document of a
// JSONL corpus (one JSON string per line) with the tokenizer folder given,
// once to warm caches and then `rounds` times, and prints the best wall
// time, the least CPU time of a round and the id count as JSON.
//   node encode.mjs js DIR corpus.jsonl rounds          @huggingface/transformers
//   node encode.mjs rust DIR corpus.jsonl rounds        Rust tokenizers, one call per document
//   node encode.mjs rust-batch DIR corpus.jsonl rounds  Rust tokenizers encodeBatch (all cores)
import { AutoTokenizer, env } from "@huggingface/transformers";
import { Tokenizer } from "tokenizers";
import fs from "node:fs";
import path from "node:path";

env.allowRemoteModels = false;
const [mode, dir, corpusPath, roundsArg] = process.argv.slice(2);
const docs = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));

let encodeAll;
if (mode === "js") {
  const tok = await AutoTokenizer.from_pretrained(path.resolve(dir));
  encodeAll = async () => {
    let ids = 0;
    for (const d of docs) ids += tok.encode(d, { add_special_tokens: false }).length;
    return ids;
  };
} else {
  const tok = Tokenizer.fromFile(path.join(dir, "tokenizer.json"));
  encodeAll = mode === "rust-batch"
    ? async () => (await tok.encodeBatch(docs, { addSpecialTokens: false })).reduce((n, e) => n + e.getIds().length, 0)
    : async () => {
      let ids = 0;
      for (const d of docs) ids += (await tok.encode(d, null, { addSpecialTokens: false })).getIds().length;
      return ids;
    };
}
const ids = await encodeAll();
let best = Infinity;
let bestCPU = Infinity;
for (let r = 0; r < Number(roundsArg || 3); r++) {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  await encodeAll();
  const c = process.cpuUsage(c0);
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  bestCPU = Math.min(bestCPU, (c.user + c.system) / 1e6); // every thread of the process
}
console.log(JSON.stringify({ seconds: best, cpu_seconds: bestCPU, ids }));
