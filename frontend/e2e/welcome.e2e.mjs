// End-to-end test of the first run in headless Chromium against the real
// app and a real HTTP hub: `suzuran serve` on the demo model, with HF_ENDPOINT
// pointing at cmd/fakehub, which serves the tiny fixture model (MLX 4-bit)
// as mlx-community/Qwen3.6-35B-A3B-4bit at a throttled speed. The welcome
// view opens by itself and shows the machine check, the download runs to
// completion with progress, and the downloaded model becomes the one that
// answers.
// Run by `make e2e`:
//
//   SUZURAN=bin/suzuran FAKEHUB=bin/fakehub node --test frontend/e2e/welcome.e2e.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { chromium } from 'playwright-core';

const root = resolve(import.meta.dirname, '../..');
const binary = resolve(root, process.env.SUZURAN ?? 'bin/suzuran');
const fakehubBinary = resolve(root, process.env.FAKEHUB ?? 'bin/fakehub');
const shots = resolve(root, process.env.E2E_SHOTS ?? 'bin/e2e');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const tinyMLX = join(root, 'engine/internal/fixtures/testdata/qwen35moe-tiny/mlx-4bit');
const repo = 'mlx-community/Qwen3.6-35B-A3B-4bit';

const dir = mkdtempSync(join(tmpdir(), 'suzuran-welcome-e2e-'));
let browser;
const children = [];

/** Starts a program and resolves with its process and the first match of pattern in its output (stdout or stderr). */
function start(program, args, env, pattern) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(program, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    let err = '';
    const look = () => {
      const m = out.match(pattern) ?? err.match(pattern);
      if (m) resolvePromise({ url: m[1], child });
    };
    child.stderr.on('data', (d) => {
      err += d;
      look();
    });
    child.stdout.on('data', (d) => {
      out += d;
      look();
    });
    child.on('exit', (code) => reject(new Error(`${program} exited with ${code}: ${err}`)));
    setTimeout(() => reject(new Error(`${program} did not start within 30 s: ${out}${err}`)), 30_000);
  });
}

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  for (const c of children) {
    c.removeAllListeners('exit');
    c.stdin.end();
    c.kill('SIGTERM');
  }
  rmSync(dir, { recursive: true, force: true });
});

test('first run: welcome view, machine check, download from the hub, the new model answers', async () => {
  // 1.33 MB of weights at 250 kB/s: about five seconds of progress to watch.
  const hub = await start(fakehubBinary, ['-dir', tinyMLX, '-repo', repo, '-rate', '250000'], {}, /fakehub at (http:\/\/\S+)/);
  const settings = join(dir, 'settings.json');
  const app = await start(
    binary,
    ['serve', '--addr', '127.0.0.1:0', '--db', join(dir, 'suzuran.db'), '--settings', settings],
    {
      XDG_CACHE_HOME: join(dir, 'cache'),
      XDG_CONFIG_HOME: join(dir, 'config'),
      HF_ENDPOINT: hub.url,
      HF_HOME: join(dir, 'hf'),
      HF_TOKEN: '',
      HF_HUB_OFFLINE: '',
      HF_HUB_CACHE: '',
    },
    /chat UI at (http:\/\/\S+)/,
  );

  const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(app.url);
  await page.getByTestId('version').waitFor();

  // The first run on the demo model opens the welcome view by itself; the
  // demo banner's button opens it again after leaving it.
  const welcome = page.getByRole('region', { name: 'Get the model' });
  const plan = welcome.getByTestId('welcome-plan');
  await plan.waitFor({ timeout: 30_000 });
  await welcome.getByRole('button', { name: 'Back to chat' }).click();
  assert.match(await page.getByTestId('demo-banner').innerText(), /Suzuran Tiny/);
  // Leaving it is written to settings.json a moment after the click.
  const seen = () => {
    try {
      return JSON.parse(readFileSync(settings, 'utf8')).welcome_seen === true;
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 100 && !seen(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(seen(), 'settings.json does not record that the welcome view was left');

  // The welcome view: what, how much, where, and the machine check.
  await page.getByRole('button', { name: 'Get Qwen3.6-35B-A3B' }).click();
  await plan.waitFor({ timeout: 30_000 });
  assert.match(await plan.innerText(), new RegExp(`${repo}.*1\\.\\d+ MB.*free`, 's'));
  assert.match(await welcome.getByTestId('welcome-dir').innerText(), new RegExp(`${join(dir, 'hf', 'hub')}/models--mlx-community--Qwen3.6-35B-A3B-4bit/snapshots/`));
  assert.match(await welcome.innerText(), /stays on this computer/);
  const findings = welcome.getByTestId('machine-check').getByRole('listitem');
  const levels = await findings.evaluateAll((items) => items.map((li) => [li.dataset.level, li.textContent]));
  assert.ok(levels.some(([, text]) => /memory/.test(text)), `no memory finding in ${JSON.stringify(levels)}`);
  assert.ok(levels.some(([, text]) => /disk has .* free/.test(text)), `no disk finding in ${JSON.stringify(levels)}`);
  assert.ok(levels.every(([level]) => level !== 'refused'), `the tiny model is refused: ${JSON.stringify(levels)}`);
  await page.screenshot({ path: join(shots, '10-welcome.png') });

  // The download: the page records each percent it shows.
  await page.evaluate(() => {
    window.percents = new Set();
    new MutationObserver(() => {
      const p = document.querySelector('progress');
      if (p) window.percents.add(Number(p.value));
    }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  await welcome.getByRole('button', { name: /^Download / }).click();
  await welcome.getByTestId('download-status').waitFor();
  await page.waitForFunction(() => Number(document.querySelector('progress')?.value) >= 5);
  await page.screenshot({ path: join(shots, '11-downloading.png') });

  // Pause, then resume: it goes on from where it stopped.
  await welcome.getByRole('button', { name: 'Pause' }).click();
  // The status changes when the service's paused event arrives, a moment
  // after the click.
  await page
    .waitForFunction(() => /Paused at/.test(document.querySelector('[data-testid="download-status"]')?.textContent ?? ''), null, { timeout: 15_000 })
    .catch(() => {});
  const paused = await welcome.getByTestId('download-status').innerText();
  const pausedAt = Number(paused.match(/Paused at (\d+) %/)?.[1]);
  assert.ok(pausedAt > 0 && pausedAt < 100, `after Pause the status says ${paused}`);
  await welcome.getByRole('button', { name: 'Resume download' }).click();
  await welcome.getByTestId('download-done').waitFor({ timeout: 60_000 });
  const percents = await page.evaluate(() => [...window.percents].sort((a, b) => a - b));
  assert.ok(percents.filter((p) => p > 0 && p < 100).length >= 2, `progress shown: ${percents}; want several steps`);
  await page.screenshot({ path: join(shots, '12-downloaded.png') });

  // The new model is the configured one and is the one in the header once loaded.
  const saved = JSON.parse(readFileSync(settings, 'utf8'));
  assert.match(saved.model, /models--mlx-community--Qwen3.6-35B-A3B-4bit\/snapshots\/[0-9a-f]{40}$/);
  await welcome.getByRole('button', { name: 'Start chatting' }).click();
  await page.waitForFunction(
    (name) => document.querySelector('[data-testid=model-state]')?.textContent.trim() === name,
    repo,
    { timeout: 60_000 },
  );
  assert.equal(await page.getByTestId('demo-banner').count(), 0);

  // It answers (the tiny model's words are noise: that an answer streams is the check).
  await page.getByRole('textbox', { name: 'Message' }).fill('Hello');
  await page.keyboard.press('Enter');
  const reply = page.getByTestId('message').nth(1);
  await reply.getByTestId('stats').waitFor({ timeout: 60_000 });
  const written = await reply.evaluate((el) =>
    [...el.querySelectorAll('[data-testid=thinking], [data-testid=answer]')].map((e) => e.textContent).join('').trim(),
  );
  assert.ok(written.length > 0, 'the downloaded model wrote nothing');
  const tokens = Number((await reply.getByTestId('stats').innerText()).match(/(\d+) tokens/)[1]);
  assert.ok(tokens > 0, `the reply's stats say ${tokens} tokens`);
  await page.screenshot({ path: join(shots, '13-new-model-answers.png') });

  // The demo stays selectable in the settings' model picker.
  await page.getByRole('button', { name: 'Settings', exact: true }).click();
  const choices = page.getByTestId('model-choices');
  await choices.getByText('Suzuran Tiny (demo)').waitFor();
  await choices.getByText(repo).waitFor();

  // Removing the downloaded model, in use: a confirmation says what it
  // frees; the app switches to the demo and the cache's folder is gone.
  const cached = dirname(dirname(saved.model));
  assert.ok(existsSync(cached));
  assert.equal(await choices.getByRole('button', { name: /^Remove Suzuran Tiny/ }).count(), 0);
  await choices.getByRole('button', { name: `Remove ${repo}` }).click();
  const ask = choices.getByRole('alertdialog', { name: `Remove ${repo}` });
  assert.match(await ask.innerText(), /This frees [\d.]+ [kM]B\. Suzuran switches to the demo model first\./);
  await page.screenshot({ path: join(shots, '14-remove-model.png') });
  await ask.getByRole('button', { name: /^Remove and free / }).click();
  assert.match(await page.getByTestId('model-removed').innerText(), new RegExp(`^Removed ${repo}: [\\d.]+ [kM]B freed\\.$`));
  assert.equal(existsSync(cached), false, `${cached} is still there`);
  await page.waitForFunction(
    () => document.querySelector('[data-testid=model-state]')?.textContent.trim() === 'Suzuran Tiny',
    null,
    { timeout: 60_000 },
  );
  await choices.getByText(repo).waitFor({ state: 'detached' });
  assert.equal(JSON.parse(readFileSync(settings, 'utf8')).model, '');
  assert.deepEqual(errors, []);
});
