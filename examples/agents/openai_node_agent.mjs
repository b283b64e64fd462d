// An agent on the official `openai` npm SDK, evaluated by `stateval run` unchanged: the
// client reads OPENAI_BASE_URL and OPENAI_API_KEY, which stateval sets.
//
// Knobs (environment):
//   AGENT_API           "chat" (Chat Completions, the whole history each call) or
//                       "responses" (chained with previous_response_id)
//   AGENT_STREAM        "1": the SDK's stream helpers (`chat.completions.stream`,
//                       `responses.stream`), read to their final answer
//   AGENT_INSTRUCTIONS  the system prompt
//
// Tools: `get_order`, posted to STATEVAL_TOOLS_URL. Protocol: JSON Lines on stdin; each
// turn's result goes to the file descriptor named by STATEVAL_PROTOCOL_FD when stateval
// sets one, else to stdout. Logs go to stderr. Install with `npm ci` in this folder.

import { createInterface } from 'node:readline';
import { writeSync } from 'node:fs';
import OpenAI from 'openai';

const API = process.env.AGENT_API ?? 'chat';
const STREAM = process.env.AGENT_STREAM === '1';
const INSTRUCTIONS = process.env.AGENT_INSTRUCTIONS ?? 'You are an order-tracking assistant.';
const MODEL = 'gpt-4o-mini';
const PROTOCOL_FD = process.env.STATEVAL_PROTOCOL_FD ? Number(process.env.STATEVAL_PROTOCOL_FD) : 1;

const ORDER_SCHEMA = {
  type: 'object',
  properties: { order: { type: 'string', description: 'The order number.' } },
  required: ['order'],
};

function send(message) {
  writeSync(PROTOCOL_FD, JSON.stringify(message) + '\n');
}

async function runTool(name, args) {
  const response = await fetch(`${process.env.STATEVAL_TOOLS_URL}/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(args),
  });
  const { result } = await response.json();
  return typeof result === 'string' ? result : JSON.stringify(result);
}

class Chat {
  constructor(client) {
    this.client = client;
    this.messages = [{ role: 'system', content: INSTRUCTIONS }];
    this.tools = [{ type: 'function', function: { name: 'get_order', description: 'Look an order up by its number.', parameters: ORDER_SCHEMA } }];
  }

  async answer(text) {
    this.messages.push({ role: 'user', content: text });
    for (;;) {
      const request = { model: MODEL, messages: this.messages, tools: this.tools };
      const completion = STREAM
        ? await this.client.chat.completions.stream(request).finalChatCompletion()
        : await this.client.chat.completions.create(request);
      const message = completion.choices[0].message;
      const calls = message.tool_calls ?? [];
      this.messages.push({ role: 'assistant', content: message.content, ...(calls.length ? { tool_calls: calls } : {}) });
      if (!calls.length) return message.content ?? '';
      for (const call of calls) {
        const output = await runTool(call.function.name, JSON.parse(call.function.arguments || '{}'));
        this.messages.push({ role: 'tool', tool_call_id: call.id, content: output });
      }
    }
  }
}

class Responses {
  constructor(client) {
    this.client = client;
    this.previous = undefined;
    this.tools = [{ type: 'function', name: 'get_order', description: 'Look an order up by its number.', parameters: ORDER_SCHEMA, strict: false }];
  }

  async create(input) {
    const request = { model: MODEL, instructions: INSTRUCTIONS, input, tools: this.tools,
                      ...(this.previous ? { previous_response_id: this.previous } : {}) };
    const response = STREAM
      ? await this.client.responses.stream(request).finalResponse()
      : await this.client.responses.create(request);
    this.previous = response.id;
    return response;
  }

  async answer(text) {
    let response = await this.create([{ role: 'user', content: text }]);
    for (;;) {
      const calls = response.output.filter((item) => item.type === 'function_call');
      if (!calls.length) return response.output_text;
      const outputs = [];
      for (const call of calls) {
        outputs.push({ type: 'function_call_output', call_id: call.call_id,
                       output: await runTool(call.name, JSON.parse(call.arguments || '{}')) });
      }
      response = await this.create(outputs);
    }
  }
}

const client = new OpenAI({ maxRetries: 0 });
const conversation = API === 'responses' ? new Responses(client) : new Chat(client);
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const message = JSON.parse(line);
  if (message.type === 'end') break;
  if (message.type !== 'turn') continue;
  send({ type: 'turn_result', turn: message.turn, output: await conversation.answer(message.input) });
}
// stdin stays open after `end` (readline does not close it): exit, do not wait on it
process.exit(0);
