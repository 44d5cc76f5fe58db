// A multi-hop search agent written with the official openai client. r1go
// trains it: the trainer (cmd/train rollout.mode=external) serves the chat
// model and hands out episodes; this program runs them with its own search
// tool (a cmd/retriever server) and reports each episode's reward.
//
//   node agent.mjs [--base-url http://127.0.0.1:8000/v1] [--retriever http://127.0.0.1:8001]
//                  [--retriever-wait 0] [--workers 8] [--trainer-reward]
//
// The retriever is probed with one query before any episode, and the agent
// stops naming its URL and what came back when it does not answer;
// --retriever-wait S waits up to S seconds, probing with back-off, for one
// that is still starting.
//
// An episode: claim it, ask the model for a turn, run the search calls it
// makes, send the results back as tool messages, and when it answers
// without a call, score the answer (exact match with a gold answer, or the
// trainer's own reward with --trainer-reward) and report it.
import OpenAI from 'openai';

const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? def : process.argv[i + 1];
};
const baseURL = arg('--base-url', 'http://127.0.0.1:8000/v1');
const retriever = arg('--retriever', 'http://127.0.0.1:8001');
const retrieverWait = Number(arg('--retriever-wait', '0'));
const workers = Number(arg('--workers', '8'));
const maxTurns = Number(arg('--max-turns', '6'));
const trainerReward = process.argv.includes('--trainer-reward');

const client = new OpenAI({ baseURL, apiKey: 'r1go' }); // r1go checks no key

async function post(path, body) {
  const res = await fetch(baseURL + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status === 204) return null; // no episode open right now
  const data = await res.json();
  if (!res.ok) throw Object.assign(new Error(data.error?.message ?? res.statusText), { status: res.status });
  return data;
}

// search asks the retriever for the best passage, formatted as Search-R1
// shows passages: "Doc 1(Title: <title>) <text>".
async function search(query) {
  const res = await fetch(retriever + '/retrieve', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ queries: [query], topk: 1 }),
  });
  if (!res.ok) return `Error: retriever ${res.status}`;
  const { result } = await res.json();
  return result[0]
    .map((doc, i) => {
      const [title, ...rest] = doc.contents.split('\n');
      return `Doc ${i + 1}(Title: ${title}) ${rest.join('\n')}\n`;
    })
    .join('');
}

// probeRetriever sends one query before any episode: a dead retriever would
// otherwise show only as error observations the policy learns from, or not
// at all when the policy seldom searches. Refused connections, 429 and 5xx
// are probed again until --retriever-wait has passed; other answers fail
// at once.
async function probeRetriever() {
  const url = retriever + '/retrieve';
  const deadline = Date.now() + retrieverWait * 1000;
  for (let pause = 250, said = false; ; pause = Math.min(2 * pause, 5000)) {
    let what, again;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ queries: ['retriever probe'], topk: 1, return_scores: true }),
      });
      const body = await res.text();
      if (res.ok && Array.isArray(JSON.parse(body).result?.[0])) return;
      what = res.ok ? `a body without one result list per query: ${body.slice(0, 200)}` : `HTTP ${res.status}: ${body.slice(0, 200)}`;
      again = res.status === 429 || res.status >= 500;
    } catch (err) {
      what = err.cause?.message ?? err.message;
      again = !(err instanceof SyntaxError);
    }
    if (!again || Date.now() + pause > deadline) {
      const hint = retrieverWait > 0 ? `(waited up to --retriever-wait ${retrieverWait} s)` : '(check --retriever, or pass --retriever-wait 30 to wait for a retriever that is starting)';
      throw new Error(`retriever ${url} does not answer: ${what} ${hint}`);
    }
    if (!said) console.log(`retriever ${url} does not answer yet (${what}); waiting up to ${retrieverWait} s`);
    said = true;
    await new Promise((r) => setTimeout(r, pause));
  }
}

const normalize = (s) => s.toLowerCase().replace(/[^\p{L}\p{N} ]/gu, ' ').replace(/\b(a|an|the)\b/g, ' ').split(/\s+/).filter(Boolean).join(' ');

// reward is exact match of the last <answer>...</answer> with a gold answer.
function reward(task, text) {
  const answers = [...text.matchAll(/<answer>([\s\S]*?)<\/answer>/g)];
  if (answers.length === 0) return 0;
  const got = normalize(answers[answers.length - 1][1]);
  return task.answers.some((a) => normalize(a) === got) ? 1 : 0;
}

async function episode(task) {
  const messages = [...task.messages];
  const headers = { 'X-R1go-Episode': task.episode_id };
  let text = '';
  for (let turn = 0; turn < maxTurns; turn++) {
    let completion;
    try {
      completion = await client.chat.completions.create({ model: 'r1go', messages, tools: task.tools }, { headers, maxRetries: 0 });
    } catch (err) {
      if (err.status === 400) break; // the episode has no room left: report what it has
      throw err;
    }
    const msg = completion.choices[0].message;
    text += msg.content ?? '';
    if (!msg.tool_calls?.length) break;
    messages.push(msg);
    for (const call of msg.tool_calls) {
      let content, query;
      try {
        query = JSON.parse(call.function.arguments).query;
      } catch {
        content = 'Error: invalid tool arguments';
      }
      if (content === undefined && call.function.name !== 'search') content = 'Error: unknown tool';
      if (content === undefined) {
        try {
          content = await search(query);
        } catch (err) {
          content = `Error: retriever unreachable (${err.cause?.message ?? err.message})`;
        }
      }
      messages.push({ role: 'tool', tool_call_id: call.id, content });
    }
  }
  const body = trainerReward ? {} : { reward: reward(task, text) };
  await post(`/episodes/${task.episode_id}/reward`, body);
  return body.reward;
}

async function worker(id, stats) {
  for (;;) {
    let task;
    try {
      task = await post('/episodes/claim', {});
    } catch (err) {
      // 410: training has ended; no status: the trainer has shut its server.
      if (err.status === 410 || err.status === undefined) return;
      throw err;
    }
    if (!task) {
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    const r = await episode(task);
    stats.episodes++;
    stats.reward += r ?? 0;
    if (stats.episodes % 20 === 0) {
      console.log(`${stats.episodes} episodes, mean reward ${(stats.reward / stats.episodes).toFixed(3)} (batch ${task.batch})`);
    }
  }
}

try {
  await probeRetriever();
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
const stats = { episodes: 0, reward: 0 };
await Promise.all(Array.from({ length: workers }, (_, i) => worker(i, stats)));
console.log(`training ended after ${stats.episodes} episodes`);
