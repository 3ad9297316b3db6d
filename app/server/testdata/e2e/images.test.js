// Images through the API with the official clients' own types, on the
// tiny vision model (engine/internal/fixtures/testdata/qwen35moe-vl-tiny):
// an OpenAI chat image_url data URL, a Responses input_image and an
// Anthropic base64 image block, each adding the image's tokens (80 merged
// patches and <|vision_start|>, <|vision_end|> for image0.png, 320 × 240);
// an http URL refused as BadRequestError; the demo model, which has no
// vision tower, refusing the image.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './server.js';

const fixtures = new URL('../../../../engine/internal/fixtures/testdata/qwen35moe-vl-tiny/', import.meta.url);
const png = readFileSync(new URL('images/image0.png', fixtures)).toString('base64');
const dataURL = `data:image/png;base64,${png}`;
const imageTokens = 82;
const question = 'What is in the picture?';

let server;
let demo;
let openai;
let anthropic;

before(async () => {
  server = await startServer([], fileURLToPath(new URL('hf-bf16', fixtures)));
  demo = await startServer([], fileURLToPath(new URL('../../../../assets/models/suzuran-tiny', import.meta.url)));
  openai = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await server.stop();
  await demo.stop();
});

test('chat completions: an image_url data URL', async () => {
  const plain = await openai.chat.completions.create({ max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'text', text: question }] }] });
  const r = await openai.chat.completions.create({ max_tokens: 1, messages: [{ role: 'user', content: [
    { type: 'image_url', image_url: { url: dataURL, detail: 'auto' } },
    { type: 'text', text: question },
  ] }] });
  assert.equal(r.usage.prompt_tokens - plain.usage.prompt_tokens, imageTokens);
});

test('responses: an input_image', async () => {
  const plain = await openai.responses.create({ max_output_tokens: 16, input: [{ role: 'user', content: [{ type: 'input_text', text: question }] }] });
  const r = await openai.responses.create({ max_output_tokens: 16, input: [{ role: 'user', content: [
    { type: 'input_image', image_url: dataURL, detail: 'auto' },
    { type: 'input_text', text: question },
  ] }] });
  assert.equal(r.usage.input_tokens - plain.usage.input_tokens, imageTokens);
});

test('messages and count_tokens: a base64 image block', async () => {
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } };
  const plain = await anthropic.messages.countTokens({ model: 'hf-bf16', messages: [{ role: 'user', content: [{ type: 'text', text: question }] }] });
  const counted = await anthropic.messages.countTokens({ model: 'hf-bf16', messages: [{ role: 'user', content: [image, { type: 'text', text: question }] }] });
  assert.equal(counted.input_tokens - plain.input_tokens, imageTokens);
  const r = await anthropic.messages.create({ model: 'hf-bf16', max_tokens: 4, messages: [{ role: 'user', content: [image, { type: 'text', text: question }] }] });
  assert.equal(r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0), counted.input_tokens);
});

test('an http image URL is refused: the server fetches nothing', async () => {
  await assert.rejects(openai.chat.completions.create({ max_tokens: 1, messages: [{ role: 'user', content: [
    { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
  ] }] }), (err) => err instanceof OpenAI.BadRequestError && /fetches nothing/.test(err.message));
});

test('the demo model refuses images', async () => {
  const client = new OpenAI({ baseURL: demo.baseURL, apiKey: 'unused', maxRetries: 0 });
  await assert.rejects(client.chat.completions.create({ max_tokens: 1, messages: [{ role: 'user', content: [
    { type: 'image_url', image_url: { url: dataURL } },
    { type: 'text', text: question },
  ] }] }), (err) => err instanceof OpenAI.BadRequestError && /does not read images/.test(err.message));
});
