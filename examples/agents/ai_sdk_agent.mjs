// An agent on the Vercel AI SDK (`ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`),
// evaluated by `stateval run` unchanged: the default providers read OPENAI_BASE_URL /
// ANTHROPIC_BASE_URL and the keys, which stateval sets.
//
// Knobs (environment):
//   AGENT_API           "responses" (`openai(...)`, the provider's default: the Responses
//                       API with `store: true`, so earlier items go back as
//                       `item_reference`s), "chat" (`openai.chat(...)`) or "messages"
//                       (`anthropic(...)`)
//   AGENT_STREAM        "1": `streamText` instead of `generateText`
//   AGENT_INSTRUCTIONS  the system prompt
//
// One tool, `get_order`, posted to STATEVAL_TOOLS_URL; the SDK runs the tool loop
// (`stopWhen: stepCountIs(5)`) and the conversation is carried with
// `response.messages`. Protocol: JSON Lines on stdin; each turn's result goes to the
// file descriptor named by STATEVAL_PROTOCOL_FD when stateval sets one, else to stdout
// (the SDK's own notices go to the console). Install with `npm ci` in this folder.

import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { anthropic } from '@ai-sdk/anthropic';
import { openai } from '@ai-sdk/openai';

const API = process.env.AGENT_API ?? 'responses';
const STREAM = process.env.AGENT_STREAM === '1';
const INSTRUCTIONS = process.env.AGENT_INSTRUCTIONS ?? 'You are an order-tracking assistant.';
const PROTOCOL_FD = process.env.STATEVAL_PROTOCOL_FD ? Number(process.env.STATEVAL_PROTOCOL_FD) : 1;

const model = API === 'messages' ? anthropic('claude-3-5-haiku-latest')
  : API === 'chat' ? openai.chat('gpt-4o-mini')
  : openai('gpt-4o-mini');

const tools = {
  get_order: tool({
    description: 'Look an order up by its number.',
    inputSchema: jsonSchema({
      type: 'object',
      properties: { order: { type: 'string', description: 'The order number.' } },
      required: ['order'],
    }),
    execute: async (args) => {
      const response = await fetch(`${process.env.STATEVAL_TOOLS_URL}/get_order`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(args),
      });
      return (await response.json()).result;
    },
  }),
};

function send(message) {
  writeSync(PROTOCOL_FD, JSON.stringify(message) + '\n');
}

const messages = [];
async function answer(text) {
  messages.push({ role: 'user', content: text });
  const request = { model, system: INSTRUCTIONS, messages, tools, stopWhen: stepCountIs(5), maxRetries: 0,
                    maxOutputTokens: 1024 };
  let output, response;
  if (STREAM) {
    const result = streamText(request);
    output = await result.text;
    response = await result.response;
  } else {
    const result = await generateText(request);
    output = result.text;
    response = result.response;
  }
  messages.push(...response.messages);
  return output;
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const message = JSON.parse(line);
  if (message.type === 'end') break;
  if (message.type !== 'turn') continue;
  send({ type: 'turn_result', turn: message.turn, output: await answer(message.input) });
}
// stdin stays open after `end` (readline does not close it): exit, do not wait on it
process.exit(0);
