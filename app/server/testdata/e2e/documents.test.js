// Documents through the API with the official clients' own types: an
// OpenAI chat "file" part, a Responses "input_file" and Anthropic
// "document" blocks (a base64 PDF and a text source), each read into the
// prompt (the server's log names it with its tokens), and a URL source
// refused as the client's error.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './server.js';

const pdf = readFileSync(new URL('../../../docs/testdata/table.pdf', import.meta.url)).toString('base64');
const notes = 'Stock is counted on the last Friday of each quarter.\nTulips: 45 pots.\n';
const question = 'How many tulips are in stock?';

let server;
let openai;
let anthropic;

before(async () => {
  server = await startServer();
  openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await server.stop();
});

// documentsRead are the server's log records of documents read.
function documentsRead() {
  return server.logs().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    .filter((e) => e.message === 'document read');
}

test('chat completions: a file part with a PDF', async () => {
  const plain = await openai.chat.completions.create({ messages: [{ role: 'user', content: question }], max_tokens: 1 });
  const r = await openai.chat.completions.create({ max_tokens: 1, messages: [{ role: 'user', content: [
    { type: 'file', file: { filename: 'table.pdf', file_data: `data:application/pdf;base64,${pdf}` } },
    { type: 'text', text: question },
  ] }] });
  assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 50, `${r.usage.prompt_tokens} tokens with the PDF, ${plain.usage.prompt_tokens} without`);
  const read = documentsRead().find((e) => e.document === 'table.pdf');
  assert.ok(read && read.format === 'pdf' && read.tokens > 50, JSON.stringify(documentsRead()));
});

test('responses: an input_file with text', async () => {
  const plain = await openai.responses.create({ input: question, max_output_tokens: 16 });
  const r = await openai.responses.create({ max_output_tokens: 16, input: [{ role: 'user', content: [
    { type: 'input_file', filename: 'notes.txt', file_data: `data:text/plain;base64,${Buffer.from(notes).toString('base64')}` },
    { type: 'input_text', text: question },
  ] }] });
  assert.ok(r.usage.input_tokens > plain.usage.input_tokens + 10, `${r.usage.input_tokens} with the file, ${plain.usage.input_tokens} without`);
  assert.ok(documentsRead().some((e) => e.document === 'notes.txt' && e.tokens > 10));
});

test('messages and count_tokens: document blocks, base64 PDF and text', async () => {
  const content = [
    { type: 'document', title: 'table.pdf', source: { type: 'base64', media_type: 'application/pdf', data: pdf } },
    { type: 'document', title: 'notes.txt', source: { type: 'text', media_type: 'text/plain', data: notes } },
    { type: 'text', text: question },
  ];
  const messages = [{ role: 'user', content }];
  const counted = await anthropic.messages.countTokens({ model: 'mlx-4bit', messages });
  const plain = await anthropic.messages.countTokens({ model: 'mlx-4bit', messages: [{ role: 'user', content: question }] });
  assert.ok(counted.input_tokens > plain.input_tokens + 60, `${counted.input_tokens} with the documents, ${plain.input_tokens} without`);
  const m = await anthropic.messages.create({ model: 'mlx-4bit', max_tokens: 4, messages });
  assert.equal(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0), counted.input_tokens);
});

test('a URL source is refused: the server fetches nothing', async () => {
  await assert.rejects(anthropic.messages.create({ model: 'mlx-4bit', max_tokens: 4, messages: [{ role: 'user', content: [
    { type: 'document', source: { type: 'url', url: 'https://example.com/report.pdf' } }, { type: 'text', text: question }] }] }),
  (err) => err instanceof Anthropic.BadRequestError && /not fetched/.test(err.message));
  await assert.rejects(openai.responses.create({ max_output_tokens: 4, input: [{ role: 'user', content: [
    { type: 'input_file', file_url: 'https://example.com/report.pdf' }] }] }),
  (err) => err instanceof OpenAI.BadRequestError && err.param === 'input[0].content[0].file_url');
});
