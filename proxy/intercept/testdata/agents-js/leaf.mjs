// leaf.mjs: an A2A agent written as the A2A JS SDK's samples write one, with
// no knowledge of Baton. Its work is a side effect (a booking, a notice) that
// it counts; GET /count shows the counts. It is configured by environment:
//
//   PORT         the port it listens on
//   PUBLIC_URL   its own URL, for its agent card
//   AGENT_NAME   its name, in its card and answers
//   FAIL_ONCE=1  the first execution for a given task text throws (the SDK
//                answers a failed task); later ones succeed
//   OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL   when set, it has a model
//                word its answer (the openai SDK's chat completions)
//   MODEL_STREAM=1      the answer is streamed, as the SDK streams by default
//                       (it asks for no usage); =usage asks for it too
//                       (stream_options.include_usage)
import express from 'express';
import OpenAI from 'openai';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const port = Number(process.env.PORT || 8081);
const name = process.env.AGENT_NAME || 'leaf';
const publicUrl = process.env.PUBLIC_URL || `http://localhost:${port}/`;
const failOnce = process.env.FAIL_ONCE === '1';
const openai = process.env.OPENAI_BASE_URL ? new OpenAI() : null;

const card = {
  name,
  description: `${name}: does one thing and says it is done`,
  supportedInterfaces: [
    { url: publicUrl, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
  ],
  version: '1.0.0',
  capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text'],
  defaultOutputModes: ['text'],
  skills: [
    {
      id: name,
      name,
      description: `Does what it is asked and answers ${name} did: <the request>`,
      tags: ['side-effect'],
      examples: ['book table 4'],
      inputModes: ['text'],
      outputModes: ['text'],
      securityRequirements: [],
    },
  ],
  documentationUrl: '',
  signatures: [],
};

// The side effects, overall and by task text.
const counts = { runs: 0, completed: 0, byText: {} };

function textOf(message) {
  return message.parts
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n')
    .trim();
}

// word has the model say what was done, in a line.
async function word(text) {
  const model = process.env.OPENAI_MODEL || 'gpt-4.1-mini';
  const messages = [
    { role: 'system', content: `You are ${name}. Say in one line what you did.` },
    { role: 'user', content: text },
  ];
  const mode = process.env.MODEL_STREAM;
  if (!mode) {
    const completion = await openai.chat.completions.create({ model, messages });
    return completion.choices[0].message.content;
  }
  const stream = await openai.chat.completions.create({
    model,
    messages,
    stream: true,
    ...(mode === 'usage' ? { stream_options: { include_usage: true } } : {}),
  });
  let said = '';
  for await (const chunk of stream) said += chunk.choices[0]?.delta?.content ?? '';
  return said;
}

class LeafExecutor {
  async execute(requestContext, eventBus) {
    const text = textOf(requestContext.userMessage);
    const mine = (counts.byText[text] ??= { runs: 0, completed: 0 });
    counts.runs++;
    mine.runs++;
    if (failOnce && mine.runs === 1) {
      throw new Error(`${name} could not do "${text}" this time`);
    }
    const said = openai ? await word(text) : `${name} did: ${text}`;
    counts.completed++;
    mine.completed++;
    eventBus.publish(
      AgentEvent.message({
        messageId: crypto.randomUUID(),
        role: Role.ROLE_AGENT,
        parts: [
          {
            content: { $case: 'text', value: said },
            metadata: undefined,
            filename: '',
            mediaType: 'text/plain',
          },
        ],
        taskId: '',
        contextId: requestContext.contextId,
        extensions: [],
        metadata: {},
        referenceTaskIds: [],
      })
    );
  }

  async cancelTask() {}
}

const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new LeafExecutor());
const app = express();
app.get('/count', (_req, res) => res.json(counts));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, (err) => {
  if (err) throw err;
  console.log(`${name} listening on :${port}`);
});
