// The official openai client against suzuran serve with the tiny fixture
// model (random weights: its text is noise, so the tests check the
// protocol, counts, reasons and reproducibility, not the words).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, countingFetch } from './server.js';

let server;
let client;
let constrained;

before(async () => {
  server = await startServer(['--queue', '16']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused' });
  constrained = (await (await fetch(`${server.base}/health`)).json()).constrained_sampling;
});

after(async () => {
  await server.stop();
});

const hello = [{ role: 'user', content: 'Hello' }];

test('models lists the loaded model with its context length', async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, 'mlx-4bit');
  assert.equal(models.data[0].context_length, 32768);
});

test('non-streaming chat completion with usage', async () => {
  const r = await client.chat.completions.create({ model: 'mlx-4bit', messages: hello, max_tokens: 8, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
});

test('max_tokens ends with finish_reason length', async () => {
  const r = await client.chat.completions.create({ messages: hello, max_completion_tokens: 3, temperature: 0.5 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 3);
});

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('streaming without usage', async () => {
  const chunks = await collect(await client.chat.completions.create({ messages: hello, max_tokens: 6, stream: true, temperature: 0 }));
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const last = chunks.at(-1);
  assert.equal(last.choices[0].finish_reason, 'length');
  for (const c of chunks) assert.equal(c.usage, undefined);
});

test('streaming with usage, and the same text as without streaming', async () => {
  const params = { messages: hello, max_tokens: 10, temperature: 0, chat_template_kwargs: { enable_thinking: false } };
  const whole = await client.chat.completions.create(params);
  const chunks = await collect(await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 10);
  assert.equal(usage.usage.prompt_tokens, whole.usage.prompt_tokens);
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
});

test('stop strings cut the text before them', async () => {
  const params = { messages: hello, max_tokens: 24, temperature: 0, chat_template_kwargs: { enable_thinking: false } };
  const full = (await client.chat.completions.create(params)).choices[0].message.content;
  const m = full.slice(3).match(/[A-Za-z]{2}/);
  assert.ok(m, `no stop string to pick in ${JSON.stringify(full)}`);
  const stop = m[0];
  const r = await client.chat.completions.create({ ...params, stop: [stop] });
  assert.equal(r.choices[0].message.content, full.slice(0, full.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('a seed reproduces a sampled answer', async () => {
  const params = { messages: hello, max_tokens: 16, temperature: 1, top_p: 0.95, seed: 1234 };
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  const c = await client.chat.completions.create({ ...params, seed: 99 });
  assert.deepEqual(a.choices[0].message, b.choices[0].message);
  assert.notDeepEqual(a.choices[0].message, c.choices[0].message);
});

test('completions with a string prompt, streamed and not', async () => {
  const r = await client.completions.create({ model: 'mlx-4bit', prompt: 'The quick brown fox', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 5);
  const chunks = await collect(await client.completions.create({ prompt: 'The quick brown fox', max_tokens: 5, temperature: 0, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0].text).join(''), r.choices[0].text);
});

test('tool-call round trip renders through the fixture template', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    // An enum: the noise model would write a free string until max_tokens.
    parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Berlin'] } }, required: ['city'] } } }];
  let call;
  if (constrained) {
    const first = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
      tool_choice: 'required', max_tokens: 64, temperature: 0, chat_template_kwargs: { enable_thinking: false } });
    assert.equal(first.choices[0].finish_reason, 'tool_calls');
    call = first.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    assert.ok(['Paris', 'Berlin'].includes(JSON.parse(call.function.arguments).city), call.function.arguments);
  } else {
    // Without constrained sampling a forced call is refused, naming
    // tool_choice; the round trip goes on with a call as a client sends it.
    await assert.rejects(client.chat.completions.create({ messages: hello, tools, tool_choice: 'required', max_tokens: 4 }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
    call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
  }
  const second = await client.chat.completions.create({
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: 'sunny, 21 °C' },
    ],
    tools, max_tokens: 6, temperature: 0,
  });
  assert.ok(['length', 'stop', 'tool_calls'].includes(second.choices[0].finish_reason));
  assert.ok(second.usage.prompt_tokens > 30, `the tools and the call are in the prompt (${second.usage.prompt_tokens} tokens)`);
});

test('json_schema output parses and validates', async () => {
  const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } },
    required: ['name', 'age'], additionalProperties: false };
  const params = { messages: [{ role: 'user', content: 'A person as JSON' }], max_tokens: 200, temperature: 0,
    chat_template_kwargs: { enable_thinking: false },
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } };
  if (!constrained) {
    await assert.rejects(client.chat.completions.create(params),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format');
    return;
  }
  const r = await client.chat.completions.create(params);
  const v = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof v.name, 'string');
  assert.ok(Number.isInteger(v.age));
  assert.deepEqual(Object.keys(v).sort(), ['age', 'name']);
});

test('abort mid-stream cancels the generation', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Tell me' }], max_tokens: 30000,
    temperature: 0, stream: true }, { signal: controller.signal });
  // The client ends the iteration quietly on abort (or throws its abort
  // error, by version); either way the server must notice and stop.
  let n = 0;
  try {
    for await (const chunk of stream) {
      if (++n === 3) controller.abort();
    }
  } catch (e) {
    assert.ok(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, e);
  }
  assert.ok(n < 1000, `the stream went on for ${n} chunks after the abort`);
  for (let i = 0; i < 100 && !server.logs().includes('generation cancelled'); i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.match(server.logs(), /generation cancelled/);
});

test('4xx errors are typed and not retried', async () => {
  const f = countingFetch();
  const c = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', fetch: f, maxRetries: 2 });
  await assert.rejects(c.chat.completions.create({ messages: hello, n: 2 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n');
  await assert.rejects(c.chat.completions.create({ model: 'gpt-4o', messages: hello }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(c.chat.completions.create({ messages: [] }), OpenAI.BadRequestError);
  await assert.rejects(c.embeddings.create({ model: 'mlx-4bit', input: 'x' }), OpenAI.BadRequestError);
  assert.equal(f.calls, 4, 'each 4xx was sent once');
});

test('a missing or wrong key is an AuthenticationError', async () => {
  const keyed = await startServer(['--api-key', 'sk-e2e-key']);
  try {
    const f = countingFetch();
    const wrong = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'sk-wrong', fetch: f });
    await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
    assert.equal(f.calls, 1);
    const right = new OpenAI({ baseURL: keyed.baseURL, apiKey: 'sk-e2e-key' });
    assert.equal((await right.models.list()).data.length, 1);
    assert.doesNotMatch(keyed.logs(), /sk-e2e-key|sk-wrong/);
  } finally {
    await keyed.stop();
  }
});

test('10 concurrent streams all complete', async () => {
  const runs = Array.from({ length: 10 }, (_, i) => (async () => {
    const chunks = await collect(await client.chat.completions.create({ messages: [{ role: 'user', content: `Stream ${i}` }],
      max_tokens: 12, temperature: 0.7, seed: i, stream: true, stream_options: { include_usage: true } }));
    return chunks.at(-1).usage.completion_tokens;
  })());
  const counts = await Promise.all(runs);
  assert.equal(counts.length, 10);
  for (const n of counts) assert.ok(n >= 1 && n <= 12);
});

test('responses API, streamed', async () => {
  const r = await client.responses.create({ model: 'mlx-4bit', input: 'Hello', max_output_tokens: 8, temperature: 0,
    reasoning: { effort: 'none' } });
  assert.equal(r.object, 'response');
  assert.equal(r.usage.output_tokens, 8);
  const events = [];
  const stream = await client.responses.create({ input: 'Hello', max_output_tokens: 8, temperature: 0, reasoning: { effort: 'none' }, stream: true });
  let text = '';
  for await (const ev of stream) {
    events.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  assert.equal(events[0], 'response.created');
  assert.equal(text, r.output_text);
});
