// An agent as written with the official model SDKs, configured by its
// environment only: OPENAI_BASE_URL and OPENAI_API_KEY, ANTHROPIC_BASE_URL
// and ANTHROPIC_API_KEY, NODE_EXTRA_CA_CERTS. For each POST /work it
// streams a chat completion (openai) and a message (@anthropic-ai/sdk),
// reads a web page with fetch, and hands what it read on to its peer
// (PEER_URL). With FAIL_FIRST=1 its first run answers 500 after all that,
// as an agent that crashes late does. GET /count says how often it ran.
import http from 'node:http';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const openai = new OpenAI({ maxRetries: 0 });
const anthropic = new Anthropic({ maxRetries: 0 });
let runs = 0, completed = 0, failed = 0;

async function work(task) {
  const chat = await openai.chat.completions.create({
    model: 'gpt-test', stream: true, messages: [{ role: 'user', content: task }],
  });
  let openaiText = '';
  for await (const chunk of chat) openaiText += chunk.choices[0]?.delta?.content ?? '';

  const stream = await anthropic.messages.create({
    model: 'claude-test', max_tokens: 64, stream: true, messages: [{ role: 'user', content: task }],
  });
  let anthropicText = '';
  for await (const ev of stream) {
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') anthropicText += ev.delta.text;
  }

  const page = await (await fetch(process.env.PAGE_URL)).text();
  const notes = page.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim();
  const handoff = await fetch(process.env.PEER_URL, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ task, notes }),
  });
  return { openai: openaiText, anthropic: anthropicText, handoff: handoff.status };
}

http.createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ runs, completed, failed }));
    return;
  }
  let body = '';
  for await (const c of req) body += c;
  runs++;
  try {
    const { task } = JSON.parse(body || "{}");
    const fail = runs === 1 && process.env.FAIL_FIRST === "1";
    const out = await work(task ?? 'plan the offsite');
    if (fail) {
      failed++;
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'failed after its calls', ...out }));
      return;
    }
    completed++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(out));
  } catch (err) {
    failed++;
    res.writeHead(502, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: String(err?.message ?? err) }));
  }
}).listen(Number(process.env.PORT), '0.0.0.0');
