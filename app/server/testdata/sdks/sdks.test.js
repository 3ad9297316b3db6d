// The SDKs people point at a local server, as installed from npm (pinned in
// package-lock.json), against suzuran serve on the random tiny fixture
// model and on the demo model: the Vercel AI SDK (openai-compatible, openai
// chat and responses, anthropic providers), LangChain JS (chat completions
// and Responses) and the OpenAI Agents SDK (chat and Responses models).
//
// What is asserted is what any model can do through the protocol: text and
// its streamed pieces agreeing, usage, a forced tool call of the right shape
// (constrained sampling writes it whatever the weights), an object that
// follows its schema, and errors surfacing as the SDK's own typed errors
// without retries. The random model writes noise until max_tokens; the
// demo model ends its turns.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { generateText, streamText, tool, Output, APICallError } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { ChatOpenAI } from '@langchain/openai';
import OpenAI from 'openai';
import { Agent, run, tool as agentTool, OpenAIChatCompletionsModel, OpenAIResponsesModel, setTracingDisabled } from '@openai/agents';

const bin = process.env.SUZURAN_BIN;
const tinyModel = process.env.SUZURAN_MODEL;
setTracingDisabled(true);
// The AI SDK warns of settings a provider leaves out (reasoningEffort for a
// model it does not know); the tests assert what reached the server.
globalThis.AI_SDK_LOG_WARNINGS = false;

// startServe runs `suzuran serve --no-ui` on a model folder, or with a
// scratch HOME and no --model on the demo model it installs; it resolves
// once /health says ready.
async function startServe(model) {
  if (!bin || !tinyModel) throw new Error('set SUZURAN_BIN and SUZURAN_MODEL (make api-e2e does)');
  const home = mkdtempSync(join(tmpdir(), 'suzuran-sdks-'));
  const args = ['serve', '--no-ui', '--addr', '127.0.0.1:0', '--backend', 'cpu'];
  if (model) args.push('--model', model);
  const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH, HOME: home } });
  let logs = '';
  child.stderr.setEncoding('utf8');
  const base = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      logs += chunk;
      const m = logs.match(/on (http:\/\/[^\s]+)\/v1/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`suzuran serve exited with ${code}:\n${logs}`)));
  });
  for (let i = 0; ; i++) {
    const res = await fetch(`${base}/health`).catch(() => null);
    if (res && res.status === 200) break;
    if (i > 600) throw new Error(`the model did not load:\n${logs}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const name = (await (await fetch(`${base}/v1/models`)).json()).data[0].id;
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return {
    base, name, logs: () => logs,
    async stop() {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, `suzuran serve on SIGTERM:\n${logs}`);
      rmSync(home, { recursive: true, force: true });
    },
  };
}

// counting wraps fetch to count requests (a retry is a second one) and
// keep the bodies sent.
function counting() {
  const f = async (url, init) => {
    f.calls++;
    if (init?.body) f.bodies.push(JSON.parse(init.body));
    return fetch(url, init);
  };
  f.calls = 0;
  f.bodies = [];
  return f;
}

const cities = ['Paris', 'Berlin', 'Tokyo'];
const weatherInput = z.object({ city: z.enum(cities) });

for (const which of ['tiny', 'demo']) {
  describe(`${which} model`, () => {
    let srv;
    let providers;
    before(async () => {
      srv = await startServe(which === 'tiny' ? tinyModel : '');
      const opts = { baseURL: `${srv.base}/v1`, apiKey: 'unused' };
      providers = {
        // supportsStructuredOutputs: the server takes json_schema.
        'openai-compatible': createOpenAICompatible({ name: 'suzuran', ...opts, includeUsage: true, supportsStructuredOutputs: true })(srv.name),
        'openai chat': createOpenAI(opts).chat(srv.name),
        'openai responses': createOpenAI(opts).responses(srv.name),
        anthropic: createAnthropic(opts)(srv.name),
      };
    });
    after(async () => { await srv.stop(); });

    for (const provider of ['openai-compatible', 'openai chat', 'openai responses', 'anthropic']) {
      // Thinking off: the answer is text, not reasoning, on every provider.
      // The openai provider sends reasoning_effort only for what it takes
      // for a reasoning model (forceReasoning); openai-compatible passes
      // its provider options through to the body.
      const noThinking = provider === 'anthropic' ? {} : provider === 'openai-compatible'
        ? { suzuran: { chat_template_kwargs: { enable_thinking: false } } }
        : { openai: { reasoningEffort: 'none', forceReasoning: true } };

      test(`AI SDK ${provider}: generateText and streamText agree, with usage`, async () => {
        // A seed as well: the openai provider sends no temperature for what
        // it takes for a reasoning model.
        // On the Responses API (which has no seed) thinking stays on, as the
        // provider sends temperature 0 for a model it does not take for a
        // reasoning one: the tiny model's reasoning comes back as the
        // SDK's reasoning text (the items' summary).
        const responses = provider === 'openai responses';
        const params = { model: providers[provider], prompt: 'Say hello.', maxOutputTokens: 12, temperature: 0, seed: 7,
          providerOptions: responses ? {} : noThinking, maxRetries: 0 };
        const whole = await generateText(params);
        assert.equal(typeof whole.text, 'string');
        assert.ok(whole.usage.inputTokens > 0, JSON.stringify(whole.usage));
        assert.ok(whole.usage.outputTokens > 0 && whole.usage.outputTokens <= 12, JSON.stringify(whole.usage));
        assert.ok(['stop', 'length'].includes(whole.finishReason), whole.finishReason);
        if (which === 'tiny') assert.equal(whole.finishReason, 'length');
        const stream = streamText(params);
        let text = '';
        for await (const piece of stream.textStream) text += piece;
        assert.equal(text, whole.text);
        assert.equal(await stream.text, whole.text);
        if (responses && which === 'tiny') {
          assert.ok(whole.reasoningText?.length > 0, `no reasoning: ${JSON.stringify(whole.content)}`);
          assert.equal(await stream.reasoningText, whole.reasoningText);
        }
        assert.deepEqual((await stream.usage).outputTokens, whole.usage.outputTokens);
      });

      test(`AI SDK ${provider}: a required tool is called with input of its schema`, async () => {
        const r = await generateText({
          model: providers[provider], prompt: 'What is the weather in Paris?', maxOutputTokens: 200, providerOptions: noThinking, maxRetries: 0,
          tools: { get_weather: tool({ description: 'Weather in a city', inputSchema: weatherInput }) }, toolChoice: 'required',
        });
        assert.equal(r.toolCalls.length, 1, JSON.stringify(r.content));
        assert.equal(r.toolCalls[0].toolName, 'get_weather');
        assert.ok(cities.includes(r.toolCalls[0].input.city), JSON.stringify(r.toolCalls[0].input));
        assert.equal(r.finishReason, 'tool-calls');
      });

      if (provider !== 'anthropic') {
        // The anthropic provider writes structured output as a forced tool
        // or output_config.format by model name; the OpenAI ones send
        // response_format / text.format, which constrained sampling keeps.
        test(`AI SDK ${provider}: an object that follows its schema`, async () => {
          const schema = z.object({ city: z.enum(cities), days: z.number().int().min(1).max(7), sunny: z.boolean() });
          const r = await generateText({ model: providers[provider], prompt: 'A forecast as JSON.', maxOutputTokens: 120, providerOptions: noThinking,
            maxRetries: 0, output: Output.object({ schema }) });
          assert.deepEqual(schema.parse(r.output), r.output);
        });
      }

      test(`AI SDK ${provider}: an error is typed and not retried`, async () => {
        const f = counting();
        const make = {
          'openai-compatible': () => createOpenAICompatible({ name: 'suzuran', baseURL: `${srv.base}/v1`, apiKey: 'x', fetch: f })('no-such-model'),
          'openai chat': () => createOpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'x', fetch: f }).chat('no-such-model'),
          'openai responses': () => createOpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'x', fetch: f }).responses('no-such-model'),
          // Claude's names are all answered by the one model; a prompt
          // over the context is the client's error.
          anthropic: () => createAnthropic({ baseURL: `${srv.base}/v1`, apiKey: 'x', fetch: f })('claude-sonnet-4-5'),
        }[provider];
        const prompt = provider === 'anthropic' ? 'word '.repeat(300_000) : 'Hi';
        await assert.rejects(generateText({ model: make(), prompt, maxOutputTokens: 4, maxRetries: 2 }), (err) => {
          assert.ok(APICallError.isInstance(err) || APICallError.isInstance(err.lastError), `${err}`);
          const e = APICallError.isInstance(err) ? err : err.lastError;
          assert.ok([400, 404].includes(e.statusCode), `${e.statusCode}: ${e.responseBody}`);
          assert.equal(e.isRetryable, false);
          return true;
        });
        assert.equal(f.calls, 1, 'the SDK retried a client error');
      });
    }

    test('LangChain chat completions: invoke, stream, usage and a forced tool', async () => {
      const llm = new ChatOpenAI({ model: srv.name, apiKey: 'unused', configuration: { baseURL: `${srv.base}/v1` }, maxTokens: 12, temperature: 0,
        modelKwargs: { chat_template_kwargs: { enable_thinking: false } }, maxRetries: 0 });
      const msg = await llm.invoke('Say hello.');
      assert.equal(typeof msg.content, 'string');
      assert.ok(msg.usage_metadata.output_tokens > 0 && msg.usage_metadata.output_tokens <= 12, JSON.stringify(msg.usage_metadata));
      let streamed = '';
      for await (const chunk of await llm.stream('Say hello.')) streamed += chunk.content;
      assert.equal(streamed, msg.content);
      const weather = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string', enum: cities } }, required: ['city'] } } }];
      const call = await new ChatOpenAI({ model: srv.name, apiKey: 'unused', configuration: { baseURL: `${srv.base}/v1` }, maxTokens: 200,
        modelKwargs: { chat_template_kwargs: { enable_thinking: false } }, maxRetries: 0 }).bindTools(weather, { tool_choice: 'required' }).invoke('Weather in Paris?');
      assert.equal(call.tool_calls.length, 1, JSON.stringify(call));
      assert.equal(call.tool_calls[0].name, 'get_weather');
      assert.ok(cities.includes(call.tool_calls[0].args.city));
    });

    test('LangChain Responses: invoke, usage, and tool_choice as LangChain sends it', async () => {
      const f = counting();
      const llm = new ChatOpenAI({ model: srv.name, apiKey: 'unused', useResponsesApi: true, configuration: { baseURL: `${srv.base}/v1`, fetch: f },
        maxTokens: 12, temperature: 0, reasoning: { effort: 'none' }, maxRetries: 0 });
      const msg = await llm.invoke('Say hello.');
      assert.equal(typeof msg.text, 'string');
      assert.ok(msg.usage_metadata.output_tokens > 0 && msg.usage_metadata.output_tokens <= 12, JSON.stringify(msg.usage_metadata));
      const weather = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string', enum: cities } }, required: ['city'] } } }];
      const big = new ChatOpenAI({ model: srv.name, apiKey: 'unused', useResponsesApi: true, configuration: { baseURL: `${srv.base}/v1`, fetch: f },
        maxTokens: 200, reasoning: { effort: 'none' }, maxRetries: 0 });
      // LangChain 1.6 drops a string tool_choice on the Responses API: the
      // request carries none, and nothing on the server can force the call.
      f.bodies.length = 0;
      await big.bindTools(weather, { tool_choice: 'required' }).invoke('Weather in Paris?');
      assert.equal(f.bodies[0].tool_choice, undefined, 'LangChain now sends tool_choice "required": assert the call is forced');
      // allowed_tools reaches the server unchanged and forces the call.
      const call = await big.bindTools(weather, { tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'get_weather' }] } })
        .invoke('Weather in Paris?');
      assert.equal(call.tool_calls.length, 1, JSON.stringify(call));
      assert.equal(call.tool_calls[0].name, 'get_weather');
      assert.ok(cities.includes(call.tool_calls[0].args.city));
    });

    for (const kind of ['chat', 'responses']) {
      test(`OpenAI Agents SDK, ${kind} model: a run, and a forced tool run to its result`, async () => {
        const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'unused', maxRetries: 0 });
        const model = kind === 'chat' ? new OpenAIChatCompletionsModel(client, srv.name) : new OpenAIResponsesModel(client, srv.name);
        const settings = kind === 'chat' ? { providerData: { chat_template_kwargs: { enable_thinking: false } } } : { reasoning: { effort: 'none' } };
        // The demo model ends its turn well within 400 tokens.
        const maxTokens = which === 'tiny' ? 12 : 400;
        const agent = new Agent({ name: 'plain', instructions: 'Be brief.', model, modelSettings: { ...settings, maxTokens, temperature: 0 } });
        if (which === 'tiny' && kind === 'responses') {
          // The random model writes until max_output_tokens: the response
          // is incomplete, which the Agents SDK's Responses model refuses.
          await assert.rejects(run(agent, 'Say hello.', { maxTurns: 1 }), /response\.incomplete/);
        } else {
          const result = await run(agent, 'Say hello.', { maxTurns: 1 });
          assert.equal(typeof result.finalOutput, 'string');
          assert.ok(result.state.usage.outputTokens > 0 && result.state.usage.outputTokens <= maxTokens, JSON.stringify(result.state.usage));
        }
        const seen = [];
        const getWeather = agentTool({ name: 'get_weather', description: 'Weather in a city', parameters: weatherInput,
          execute: async ({ city }) => { seen.push(city); return `sunny in ${city}`; } });
        const withTool = new Agent({ name: 'tools', instructions: 'Use the tool.', model, tools: [getWeather], toolUseBehavior: 'stop_on_first_tool',
          modelSettings: { ...settings, maxTokens: 200, toolChoice: 'required' } });
        const r = await run(withTool, 'Weather in Paris?', { maxTurns: 2 });
        assert.equal(seen.length, 1);
        assert.ok(cities.includes(seen[0]));
        assert.equal(r.finalOutput, `sunny in ${seen[0]}`);
      });
    }
  });
}
