// The official @anthropic-ai/sdk client against suzuran serve with the tiny
// fixture model.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startServer, countingFetch } from './server.js';

let server;
let client;
let constrained;

before(async () => {
  server = await startServer();
  client = new Anthropic({ baseURL: server.base, apiKey: 'unused' });
  constrained = (await (await fetch(`${server.base}/health`)).json()).constrained_sampling;
});

after(async () => {
  await server.stop();
});

const hello = [{ role: 'user', content: 'Hello' }];
const weather = [{ name: 'get_weather', description: 'Weather in a city',
  // An enum: the noise model would write a free string until max_tokens.
  input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Berlin'] } }, required: ['city'] } }];

test('a message with a system prompt', async () => {
  const m = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 8, system: 'Be brief.', messages: hello,
    temperature: 0, thinking: { type: 'disabled' } });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 8);
  assert.equal(m.content[0].type, 'text');
});

test('streamed text matches the whole message', async () => {
  const params = { model: 'mlx-4bit', max_tokens: 12, messages: hello, temperature: 0, thinking: { type: 'disabled' } };
  const whole = await client.messages.create(params);
  const stream = client.messages.stream(params);
  let text = '';
  const types = [];
  stream.on('text', (t) => { text += t; });
  stream.on('streamEvent', (ev) => types.push(ev.type));
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.equal(final.content[0].text, whole.content[0].text);
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_delta') && types.includes('message_delta'));
});

test('thinking enabled streams a thinking block', async () => {
  // Anthropic's smallest budget is 1,024 tokens, and max_tokens must be above it.
  const stream = client.messages.stream({ max_tokens: 1040, messages: hello, temperature: 0,
    thinking: { type: 'enabled', budget_tokens: 1024 } });
  let thinking = '';
  stream.on('thinking', (t) => { thinking += t; });
  const final = await stream.finalMessage();
  assert.equal(final.content[0].type, 'thinking');
  assert.equal(final.content[0].thinking, thinking);
});

test('stop sequences', async () => {
  const params = { max_tokens: 24, messages: hello, temperature: 0, thinking: { type: 'disabled' } };
  const full = (await client.messages.create(params)).content[0].text;
  const m = full.slice(3).match(/[A-Za-z]{2}/);
  assert.ok(m, `no stop sequence to pick in ${JSON.stringify(full)}`);
  const r = await client.messages.create({ ...params, stop_sequences: [m[0]] });
  assert.equal(r.stop_reason, 'stop_sequence');
  assert.equal(r.stop_sequence, m[0]);
  assert.equal(r.content[0].text, full.slice(0, full.indexOf(m[0])));
});

test('count_tokens', async () => {
  const r = await client.messages.countTokens({ model: 'claude-haiku-4-5', messages: hello, system: 'Be brief.', tools: weather });
  assert.ok(r.input_tokens > 20, `${r.input_tokens} tokens with a tool`);
});

test('tool use, streamed, and the tool result back', async () => {
  let toolUse;
  if (constrained) {
    const stream = client.messages.stream({ max_tokens: 64, messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: weather, tool_choice: { type: 'any' }, temperature: 0, thinking: { type: 'disabled' } });
    let partial = '';
    stream.on('inputJson', (delta) => { partial += delta; });
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    toolUse = final.content.find((b) => b.type === 'tool_use');
    assert.equal(toolUse.name, 'get_weather');
    assert.deepEqual(JSON.parse(partial), toolUse.input);
  } else {
    await assert.rejects(client.messages.create({ max_tokens: 8, messages: hello, tools: weather, tool_choice: { type: 'any' } }),
      (e) => e instanceof Anthropic.BadRequestError && e.status === 400);
    toolUse = { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } };
  }
  const next = await client.messages.create({ max_tokens: 6, temperature: 0, tools: weather, messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: [toolUse] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUse.id, content: 'sunny' }] },
  ] });
  assert.ok(['max_tokens', 'end_turn', 'tool_use'].includes(next.stop_reason));
  assert.ok(next.usage.input_tokens + next.usage.cache_read_input_tokens > 40);
});

test('errors are typed, in Anthropic shape, and 4xx are not retried', async () => {
  const f = countingFetch();
  const c = new Anthropic({ baseURL: server.base, apiKey: 'unused', fetch: f, maxRetries: 2 });
  await assert.rejects(c.messages.create({ max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image',
    source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] }),
  (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error');
  await assert.rejects(c.messages.create({ model: 'gpt-4o', max_tokens: 4, messages: hello }), Anthropic.NotFoundError);
  assert.equal(f.calls, 2);
  const keyed = await startServer(['--api-key', 'sk-ant-local']);
  try {
    await assert.rejects(new Anthropic({ baseURL: keyed.base, apiKey: 'nope' }).messages.create({ max_tokens: 2, messages: hello }),
      Anthropic.AuthenticationError);
    const ok = await new Anthropic({ baseURL: keyed.base, apiKey: 'sk-ant-local' }).messages.create({ max_tokens: 2, messages: hello });
    assert.equal(ok.usage.output_tokens, 2);
  } finally {
    await keyed.stop();
  }
});
