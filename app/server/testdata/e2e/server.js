// Starts `suzuran serve` on a free port for the tests and stops it.
//
// SUZURAN_BIN is the binary, SUZURAN_MODEL the model folder (the Makefile's
// api-e2e target sets both: the tiny fixture model).
import { spawn } from 'node:child_process';

export const model = process.env.SUZURAN_MODEL;
const bin = process.env.SUZURAN_BIN;

// startServer runs serve with extra flags (on dir, by default the model
// SUZURAN_MODEL names) and resolves once /health says ready:
// { baseURL, logs(), stop() }.
export async function startServer(flags = [], dir = model) {
  if (!bin || !dir) {
    throw new Error('set SUZURAN_BIN and SUZURAN_MODEL (make api-e2e does)');
  }
  // --no-ui: the API alone, which opens none of the user's conversations
  // or settings (the chat UI beside it is frontend/e2e's).
  const child = spawn(bin, ['serve', '--no-ui', '--model', dir, '--addr', '127.0.0.1:0', '--backend', 'cpu', ...flags], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let logs = '';
  child.stderr.setEncoding('utf8');
  const address = new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      logs += chunk;
      const m = logs.match(/on (http:\/\/[^\s]+)\/v1/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`suzuran serve exited with ${code}:\n${logs}`)));
  });
  const base = await address;
  for (let i = 0; ; i++) {
    const res = await fetch(`${base}/health`).catch(() => null);
    if (res && res.status === 200) break;
    if (i > 200) throw new Error(`the model did not load:\n${logs}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return {
    base,
    baseURL: `${base}/v1`,
    logs: () => logs,
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`suzuran serve exited with ${code} on SIGTERM:\n${logs}`);
    },
  };
}

// countingFetch counts the HTTP requests a client sends, to tell retries.
export function countingFetch() {
  const f = (...args) => {
    f.calls++;
    return fetch(...args);
  };
  f.calls = 0;
  return f;
}
