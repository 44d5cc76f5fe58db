// make_openai_shapes.js writes openai_shapes.json: the fields of the Chat
// Completions response types as the official openai npm package declares
// them, for serve's protocol tests. Run it where that package is installed:
//
//   npm install --save-exact openai@6.9.1   (in a scratch folder)
//   node make_openai_shapes.js SCRATCH/node_modules/openai > openai_shapes.json
//
// It reads the .d.ts files line by line: interface and namespace blocks
// nest by braces; a field is `name?: type;` on the block's own indentation.
const fs = require('fs');
const path = require('path');
const root = process.argv[2];
const files = ['resources/chat/completions/completions.d.ts', 'resources/completions.d.ts', 'resources/models.d.ts'];
const wanted = [
  'ChatCompletion', 'ChatCompletion.Choice', 'ChatCompletion.Choice.Logprobs', 'ChatCompletionMessage',
  'ChatCompletionMessageFunctionToolCall', 'ChatCompletionMessageFunctionToolCall.Function',
  'ChatCompletionChunk', 'ChatCompletionChunk.Choice', 'ChatCompletionChunk.Choice.Delta',
  'ChatCompletionChunk.Choice.Delta.ToolCall', 'ChatCompletionChunk.Choice.Delta.ToolCall.Function',
  'ChatCompletionChunk.Choice.Logprobs', 'ChatCompletionTokenLogprob', 'ChatCompletionTokenLogprob.TopLogprob',
  'CompletionUsage', 'Model',
];
const types = {};
for (const f of files) {
  const lines = fs.readFileSync(path.join(root, f), 'utf8').split('\n');
  const stack = []; // {name, indent, isInterface}
  let comment = false;
  for (const line of lines) {
    const t = line.trim();
    if (t.startsWith('/**')) comment = !t.endsWith('*/');
    if (comment) { if (t.endsWith('*/')) comment = false; continue; }
    if (t.startsWith('*') || t.startsWith('//') || t.startsWith('/**')) continue;
    const indent = line.length - line.trimStart().length;
    let m = /^(?:export )?(?:declare )?(interface|namespace) (\w+)(?:<[^>]*>)?(?: extends [^{]+)? \{$/.exec(t);
    if (m) { stack.push({ name: m[2], indent, isInterface: m[1] === 'interface' }); continue; }
    if (t === '}' && stack.length && stack[stack.length - 1].indent === indent) { stack.pop(); continue; }
    const top = stack[stack.length - 1];
    if (!top || !top.isInterface || indent !== top.indent + 4) continue;
    m = /^(\w+)(\?)?: (.*?);?$/.exec(t);
    if (!m) continue;
    const name = stack.map((s) => s.name).join('.');
    (types[name] = types[name] || {})[m[1]] = { optional: !!m[2], nullable: /\bnull\b/.test(m[3]), type: m[3] };
  }
}
const out = { source: 'openai npm ' + JSON.parse(fs.readFileSync(path.join(root, 'package.json'))).version, types: {} };
for (const w of wanted) {
  if (!types[w]) throw new Error('no interface ' + w);
  out.types[w] = types[w];
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
