// Claude Code and Codex, the command-line agents, against suzuran serve on
// the demo model, each in a scratch home and folder with no credentials of
// any service. The demo model is the one that ends its turns (the random
// fixture model writes until max_tokens, which both agents report as a
// failed run); what is tested is the protocol end to end: the agents'
// own requests (their system prompts, tools, thinking settings, Codex's
// namespace and web_search tools, Claude Code's max_tokens beyond the
// context and its retry) answered until the run completes.
//
// No request may leave the machine: every client runs with HTTP(S)_PROXY
// pointing at a listener of this test that counts connections and answers
// none, with the agents' telemetry and update checks switched off.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.SUZURAN_BIN;
// Claude Code's postinstall copies its native binary over a placeholder;
// npm may skip install scripts, and the wrapper it ships for that case
// finds the same binary.
const claude = join(here, 'node_modules', '@anthropic-ai', 'claude-code', 'cli-wrapper.cjs');
const codex = join(here, 'node_modules', '@openai', 'codex', 'bin', 'codex.js');

let scratch;
let server;
let proxy;
// proxied lists what reached the proxy: its first line (CONNECT host:port).
const proxied = [];
let current = '';

// run starts a command and resolves with its exit code and output.
function run(cmd, args, opts) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeout ?? 240_000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

// startServe runs `suzuran serve --no-ui` with a scratch HOME, which makes
// it install and serve the demo model (its folder name is how serve knows
// the model cannot think).
async function startServe(home, env = {}) {
  if (!bin) throw new Error('set SUZURAN_BIN (make api-e2e does)');
  const child = spawn(bin, ['serve', '--no-ui', '--addr', '127.0.0.1:0', '--backend', 'cpu', '--log-requests'], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH, HOME: home, ...env },
  });
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
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return {
    base,
    logs: () => logs,
    async stop() {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, `suzuran serve on SIGTERM:\n${logs}`);
    },
  };
}

// requests are the server's request log lines for a path.
function requests(path, srv = server) {
  return srv.logs().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    .filter((e) => e.message === 'request' && e.path === path);
}

// offline is the environment every agent runs in: a scratch HOME, no
// credentials, every proxy at the counting listener, the agents' traffic
// beside the API switched off.
function offline(home) {
  const dead = `http://127.0.0.1:${proxy.address().port}`;
  return {
    PATH: process.env.PATH, HOME: home, TMPDIR: join(home, 'tmp'),
    HTTP_PROXY: dead, HTTPS_PROXY: dead, ALL_PROXY: dead, http_proxy: dead, https_proxy: dead, all_proxy: dead,
    NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost',
    DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1', DISABLE_BUG_COMMAND: '1', CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: '1',
  };
}

function scratchDir(name) {
  const dir = join(scratch, name);
  mkdirSync(join(dir, 'home', 'tmp'), { recursive: true });
  mkdirSync(join(dir, 'work'), { recursive: true });
  return dir;
}

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'suzuran-agents-'));
  proxy = createServer((sock) => {
    const who = current;
    sock.once('data', (d) => { proxied.push(`${who}: ${d.toString('latin1').split('\r\n')[0]}`); sock.destroy(); });
    sock.on('error', () => {});
  });
  await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
  server = await startServe(scratchDir('serve') + '/home');
});

after(async () => {
  await server?.stop();
  proxy?.close();
  assert.deepEqual(proxied, [], 'a client tried to reach the network through the proxy');
  rmSync(scratch, { recursive: true, force: true });
});

// claudeRun runs `claude -p` with a short system prompt and the Read tool
// (Claude Code's default prompt, 26,000 tokens, takes minutes to prefill
// on two CPU cores).
async function claudeRun(format, srv = server, key = 'sk-ant-dummy') {
  current = `claude ${format}`;
  const dir = scratchDir(`claude-${format}-${key}`);
  const env = { ...offline(join(dir, 'home')), ANTHROPIC_BASE_URL: srv.base, ANTHROPIC_API_KEY: key };
  const args = ['-p', 'What does os.getcwd return?', '--output-format', format, '--system-prompt', 'Be brief.',
    '--tools', 'Read', '--no-session-persistence'];
  if (format === 'stream-json') args.push('--verbose');
  return run(process.execPath, [claude, ...args], { cwd: join(dir, 'work'), env });
}

test('claude -p --output-format json completes', async () => {
  const before = requests('/v1/messages').length;
  const r = await claudeRun('json');
  assert.equal(r.code, 0, `claude exited with ${r.code} ${r.signal}:\n${r.stdout}\n${r.stderr}`);
  const result = JSON.parse(r.stdout);
  assert.equal(result.type, 'result');
  assert.equal(result.is_error, false, r.stdout);
  assert.equal(result.stop_reason, 'end_turn');
  assert.equal(typeof result.result, 'string');
  const seen = requests('/v1/messages').slice(before);
  // Claude Code asks for more max_tokens than the context holds; the 400
  // in Anthropic's words makes it retry with what fits.
  assert.ok(seen.some((e) => e.status === 200), `no answered /v1/messages in the log:\n${server.logs()}`);
  assert.ok(seen.every((e) => e.status === 200 || e.status === 400), JSON.stringify(seen));
});

test('claude -p --output-format stream-json --verbose completes', async () => {
  const r = await claudeRun('stream-json');
  assert.equal(r.code, 0, `claude exited with ${r.code} ${r.signal}:\n${r.stdout}\n${r.stderr}`);
  const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(events[0].type, 'system');
  assert.ok(events.some((e) => e.type === 'assistant' && e.message.model), r.stdout);
  const result = events.at(-1);
  assert.equal(result.type, 'result');
  assert.equal(result.is_error, false, r.stdout);
});

test('codex exec with the Responses API completes', async () => {
  current = 'codex';
  const dir = scratchDir('codex');
  const codexHome = join(dir, 'home', 'codex');
  mkdirSync(codexHome, { recursive: true });
  const models = await (await fetch(`${server.base}/v1/models`)).json();
  writeFileSync(join(codexHome, 'config.toml'), [
    `model = ${JSON.stringify(models.data[0].id)}`,
    'model_provider = "suzuran"',
    // What Codex fetches at start beside the model: its update check
    // (github.com) and the plugin catalogue (chatgpt.com, [features]).
    'check_for_update_on_startup = false',
    '',
    '[model_providers.suzuran]',
    'name = "Suzuran"',
    `base_url = "${server.base}/v1"`,
    'wire_api = "responses"',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[features]',
    'plugins = false',
    '',
  ].join('\n'));
  const before = requests('/v1/responses').length;
  const r = await run(process.execPath, [codex, 'exec', '--skip-git-repo-check', '--json', 'What does os.getcwd return?'],
    { cwd: join(dir, 'work'), env: { ...offline(join(dir, 'home')), CODEX_HOME: codexHome } });
  assert.equal(r.code, 0, `codex exited with ${r.code} ${r.signal}:\n${r.stdout}\n${r.stderr}`);
  const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(events.some((e) => e.type === 'turn.completed'), r.stdout);
  assert.ok(events.some((e) => e.type === 'item.completed' && e.item.type === 'agent_message'), r.stdout);
  assert.ok(!events.some((e) => e.type === 'turn.failed'), r.stdout);
  const seen = requests('/v1/responses').slice(before);
  assert.ok(seen.length > 0 && seen.every((e) => e.status === 200), JSON.stringify(seen));
  // Codex's namespace and web_search tools were left out, with a log line.
  assert.match(server.logs(), /left out of the prompt/);
});

test('claude -p with a wrong key stops at the first 401', async () => {
  // The 401 says x-should-retry: false; without it Claude Code retried a
  // wrong key for minutes.
  const keyed = await startServe(join(scratch, 'serve', 'home'), { SUZURAN_API_KEY: 'sk-right' });
  try {
    const r = await claudeRun('json', keyed, 'sk-wrong');
    assert.notEqual(r.code, 0, r.stdout);
    const result = JSON.parse(r.stdout);
    assert.equal(result.is_error, true, r.stdout);
    const seen = requests('/v1/messages', keyed);
    assert.deepEqual(seen.map((e) => e.status), [401], keyed.logs());
  } finally {
    await keyed.stop();
  }
});
