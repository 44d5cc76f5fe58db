// The @huggingface/transformers side of the tokenizer benchmark: encodes
// every document of a JSONL corpus (one JSON string per line) with the
// tokenizer folder given, once to warm the cache and then `rounds` times,
// and prints the best time and the id count as JSON.
// Usage: node encode.mjs DIR corpus.jsonl rounds
import { AutoTokenizer, env } from "@huggingface/transformers";
import fs from "node:fs";
import path from "node:path";

env.allowRemoteModels = false;
const [dir, corpusPath, roundsArg] = process.argv.slice(2);
const tok = await AutoTokenizer.from_pretrained(path.resolve(dir));
const docs = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
const encodeAll = () => {
  let ids = 0;
  for (const d of docs) ids += tok.encode(d, { add_special_tokens: false }).length;
  return ids;
};
const ids = encodeAll();
let best = Infinity;
for (let r = 0; r < Number(roundsArg || 3); r++) {
  const t0 = process.hrtime.bigint();
  encodeAll();
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(JSON.stringify({ seconds: best, ids }));
