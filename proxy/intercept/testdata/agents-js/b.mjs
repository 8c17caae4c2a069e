// b.mjs: an A2A agent whose work is an OpenAI Agents SDK run. The model
// plans; two tools hand work on to other A2A agents with the A2A JS SDK's
// client, each message with a fresh id as the SDK's samples send them. It is
// written as an agent author would write it, with no knowledge of Baton, and
// configured by environment only:
//
//   PORT, PUBLIC_URL        where it listens, and its URL for its agent card
//   C_URL, D_URL            the peers' base URLs (their agent cards are there)
//   OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_DEFAULT_MODEL   the model, as the
//                           OpenAI SDKs read them
//   OPENAI_AGENTS_DISABLE_TRACING=1   no trace export to OpenAI
//   STREAM=1                the run streams the model's answers
//   A2A_STREAMING=1         its card says it streams: it serves SendStreamingMessage
//   SHARED_MEMORY=1         it remembers every task it was given, across requests,
//                           and its instructions list them (a memory all runs share)
//
// A tool whose peer answers with a failed task (or an error) fails the run,
// and so the task: the tools rethrow instead of telling the model.
import express from 'express';
import { Agent, run, tool } from '@openai/agents';
import { z } from 'zod';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const port = Number(process.env.PORT || 8080);
const publicUrl = process.env.PUBLIC_URL || `http://localhost:${port}/`;

const card = {
  name: 'coordinator',
  description: 'Plans a task and has other agents carry out its steps',
  supportedInterfaces: [
    { url: publicUrl, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
  ],
  version: '1.0.0',
  capabilities: { streaming: process.env.A2A_STREAMING === '1', pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text'],
  defaultOutputModes: ['text'],
  skills: [
    {
      id: 'coordinate',
      name: 'Coordinate',
      description: 'Books what a task needs, then has everyone told',
      tags: ['planning'],
      examples: ['dinner for four on Friday'],
      inputModes: ['text'],
      outputModes: ['text'],
      securityRequirements: [],
    },
  ],
  documentationUrl: '',
  signatures: [],
};

function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n')
    .trim();
}

function textMessage(text, role, contextId = '') {
  return {
    messageId: crypto.randomUUID(),
    role,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    taskId: '',
    contextId,
    extensions: [],
    metadata: {},
    referenceTaskIds: [],
  };
}

const clients = new ClientFactory();

// ask sends text to the agent at url and returns its answer's text; a
// failed task (or any task not completed) is an error.
async function ask(url, text) {
  const client = await clients.createFromUrl(url);
  const answer = await client.sendMessage({
    tenant: '',
    message: textMessage(text, Role.ROLE_USER),
    configuration: undefined,
    metadata: {},
  });
  if ('messageId' in answer) {
    return textOf(answer);
  }
  if (answer.status?.state !== TaskState.TASK_STATE_COMPLETED) {
    throw new Error(
      `${url} answered a task in state ${taskStateToJSON(answer.status?.state)}: ${textOf(answer.status?.message)}`
    );
  }
  return answer.artifacts.map((a) => textOf(a)).join('\n');
}

const book = tool({
  name: 'book',
  description: 'Has agent C book what the task needs. Returns what C did.',
  parameters: z.object({ request: z.string() }),
  errorFunction: null,
  execute: async ({ request }) => ask(process.env.C_URL, request),
});

const notify = tool({
  name: 'notify',
  description: 'Has agent D tell everyone concerned. Returns what D did.',
  parameters: z.object({ request: z.string() }),
  errorFunction: null,
  execute: async ({ request }) => ask(process.env.D_URL, request),
});

const instructions = 'Book what the task needs with the book tool, then notify with the notify tool, then summarise.';
const remembered = [];

const planner = new Agent({
  name: 'coordinator',
  instructions:
    process.env.SHARED_MEMORY === '1' ? () => `${instructions} Tasks so far: ${remembered.join('; ')}.` : instructions,
  tools: [book, notify],
});

const counts = { runs: 0, completed: 0, failed: 0 };

class CoordinatorExecutor {
  async execute(requestContext, eventBus) {
    counts.runs++;
    const task = textOf(requestContext.userMessage);
    remembered.push(task);
    let result;
    try {
      result = await run(planner, task, { stream: process.env.STREAM === '1' });
      if (result.completed) {
        // A streamed run: read it to its end, as a UI would.
        for await (const _ of result.toTextStream()) {
        }
        await result.completed;
        if (result.error) throw result.error;
      }
    } catch (err) {
      counts.failed++;
      throw err;
    }
    counts.completed++;
    eventBus.publish(AgentEvent.message(textMessage(String(result.finalOutput), Role.ROLE_AGENT, requestContext.contextId)));
  }

  async cancelTask() {}
}

const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new CoordinatorExecutor());
const app = express();
app.get('/count', (_req, res) => res.json(counts));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, (err) => {
  if (err) throw err;
  console.log(`coordinator listening on :${port}`);
});
