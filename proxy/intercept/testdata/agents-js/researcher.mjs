// researcher.mjs: an agent written with the OpenAI Agents SDK as its
// author would, with no knowledge of Baton: for each POST /work
// {"task": ...} it runs an agent that has one tool, search, and answers
// {"answer": ...}. A run that fails answers 500 with the error the SDK
// raised, which it also logs. GET /count says how often it ran. It is
// configured by environment only:
//
//   PORT                    where it listens
//   OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_DEFAULT_MODEL   the model, as the
//                           OpenAI SDKs read them
//   OPENAI_AGENTS_DISABLE_TRACING=1   no trace export to OpenAI
import http from 'node:http';
import { Agent, run, tool } from '@openai/agents';
import { z } from 'zod';

const search = tool({
  name: 'search',
  description: 'Searches the team wiki. Returns the passages that match.',
  parameters: z.object({ request: z.string() }),
  execute: async ({ request }) => `no passage matches "${request}" yet`,
});

const researcher = new Agent({
  name: 'researcher',
  instructions: 'Search the wiki until you find the answer, then give it.',
  tools: [search],
});

const counts = { runs: 0, completed: 0, failed: 0 };

http
  .createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/count') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(counts));
      return;
    }
    let body = '';
    for await (const c of req) body += c;
    counts.runs++;
    try {
      const { task } = JSON.parse(body || '{}');
      const result = await run(researcher, task ?? 'find the offsite budget');
      counts.completed++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ answer: String(result.finalOutput) }));
    } catch (err) {
      counts.failed++;
      const error = { error: err?.constructor?.name ?? 'Error', message: String(err?.message ?? err), status: err?.status, code: err?.code };
      console.error('the run failed:', JSON.stringify(error));
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify(error));
    }
  })
  .listen(Number(process.env.PORT), '0.0.0.0');
