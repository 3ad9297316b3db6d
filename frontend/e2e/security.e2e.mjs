// The chat window's own defences in headless Chromium against `suzuran
// serve`: with --api-key the browser logs in with its password prompt and
// the whole window works after it, under the page's Content-Security-Policy
// with no violation; a page of an origin allowed for the API (--cors) can
// neither call the window's methods nor frame it. Run by `make e2e`:
//
//   SUZURAN=bin/suzuran node --test frontend/e2e/security.e2e.mjs

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { killServers, startServe, stopServer } from './serve.mjs';

const root = resolve(import.meta.dirname, '../..');
const binary = resolve(root, process.env.SUZURAN ?? 'bin/suzuran');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const key = 'sk-e2e-window-key';

const dir = mkdtempSync(join(tmpdir(), 'suzuran-e2e-security-'));
let browser;
let other; // a web page on another origin: { server, origin }

/** Starts `suzuran serve` on the demo model with a private database and settings. */
function startServer(name, extra) {
  const files = ['--db', join(dir, `${name}.db`), '--settings', join(dir, `${name}.json`)];
  return startServe(binary, ['--addr', '127.0.0.1:0', ...files, ...extra], {
    ...process.env,
    XDG_CACHE_HOME: join(dir, 'cache'),
    XDG_CONFIG_HOME: join(dir, 'config'),
    HF_HOME: join(dir, 'hf'),
    HF_HUB_OFFLINE: '1',
  });
}

/**
 * Records in the page every Content-Security-Policy violation (the
 * securitypolicyviolation event) and every console error, from the first
 * script on.
 */
async function watchPolicy(page) {
  const consoleErrors = [];
  page.on('console', (m) => {
    // The page names no icon, so the browser's own try at /favicon.ico is a 404.
    if (m.location().url.endsWith('/favicon.ico')) return;
    if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) consoleErrors.push(`${m.text()} (${m.location().url})`);
  });
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`),
    );
  });
  return {
    consoleErrors,
    violations: () => page.evaluate(() => window.__violations),
  };
}

before(async () => {
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  // Another site's page: it tries the window's methods, the API, and a frame.
  const server = createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>elsewhere</title><p>another site</p>');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  other = { server, origin: `http://127.0.0.1:${server.address().port}` };
});

after(async () => {
  await browser?.close();
  other?.server.close();
  killServers();
  rmSync(dir, { recursive: true, force: true });
});

test('with --api-key the browser asks for the key, then the window works under its CSP', async () => {
  const server = await startServer('keyed', ['--api-key', key]);
  try {
    // Without the key the page is refused with a challenge that makes the
    // browser show its password prompt (headless Chromium, which has no
    // prompt, fails the navigation with ERR_INVALID_AUTH_CREDENTIALS).
    const refused = await fetch(server.url);
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /^Basic /);
    assert.doesNotMatch(await refused.text(), new RegExp(key));
    const anonymous = await browser.newPage();
    await assert.rejects(anonymous.goto(server.url), /ERR_INVALID_AUTH_CREDENTIALS/);
    await anonymous.close();

    // With it (what the user types into the prompt; the user name is free).
    const context = await browser.newContext({
      httpCredentials: { username: 'me', password: key },
      viewport: { width: 1100, height: 720 },
    });
    const page = await context.newPage();
    const policy = await watchPolicy(page);
    const errors = [];
    page.on('pageerror', (e) => errors.push(e));
    const response = await page.goto(server.url);
    assert.equal(response.status(), 200);
    const headers = response.headers();
    assert.equal(headers['x-frame-options'], 'DENY');
    assert.match(headers['content-security-policy'], /frame-ancestors 'none'/);
    assert.match(headers['content-security-policy'], /script-src 'self'/);
    // The key is nowhere in what the page was sent.
    assert.doesNotMatch(await response.text(), new RegExp(key));

    await page.getByTestId('version').waitFor();
    // The demo model's first run opens the welcome view; back to the chat.
    const welcome = page.getByRole('region', { name: 'Get the model' });
    await welcome.getByTestId('welcome-error').waitFor();
    await welcome.getByRole('button', { name: 'Back to chat' }).click();
    // A question and its streamed, rendered answer (markdown, code
    // highlighting): the calls and the event stream carry the key.
    await page.getByRole('textbox', { name: 'Message' }).fill('What does json.dumps do?');
    await page.keyboard.press('Enter');
    const reply = page.getByTestId('message').nth(1);
    await reply.getByTestId('stats').waitFor({ timeout: 60_000 });
    assert.match(await reply.getByTestId('answer').innerText(), /\S/);
    const nav = page.getByRole('navigation', { name: 'Conversations' });
    await nav.getByRole('button', { name: /^What does json\.dumps/ }).waitFor();
    // Settings, saved.
    await nav.getByRole('button', { name: 'Settings' }).click();
    const settings = page.getByRole('region', { name: 'Settings' });
    await settings.getByRole('textbox', { name: 'System prompt' }).fill('Answer briefly.');
    await settings.getByRole('button', { name: 'Save' }).click();
    await settings.getByText('Saved.').waitFor();

    assert.deepEqual(await policy.violations(), [], 'Content-Security-Policy violations');
    assert.deepEqual(policy.consoleErrors, [], 'console errors');
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    await stopServer(server);
  }
});

test('a page of an origin allowed for the API gets neither the window\'s calls nor a frame of it', async () => {
  // No key (the app's loopback default): only the origin rules stand in the way.
  const server = await startServer('open', ['--cors', other.origin]);
  const ui = server.url.replace(/\/$/, '');
  try {
    const page = await browser.newPage();
    const policy = await watchPolicy(page);
    await page.goto(other.origin);
    const tried = await page.evaluate(async (ui) => {
      const attempt = async (path, init) => {
        try {
          const r = await fetch(ui + path, init);
          return `${r.status} ${(await r.text()).slice(0, 80)}`;
        } catch (e) {
          return `refused: ${e.name}`;
        }
      };
      const json = { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '[""]' };
      return {
        api: await attempt('/v1/models'),
        conversations: await attempt('/api/call/Conversations', json),
        settings: await attempt('/api/call/Settings', { ...json, body: '[]' }),
        events: await new Promise((resolveEvents) => {
          const source = new EventSource(ui + '/api/events');
          source.onopen = () => (source.close(), resolveEvents('open'));
          source.onerror = () => (source.close(), resolveEvents('refused'));
        }),
      };
    }, ui);
    // The origin is allowed for the API…
    assert.match(tried.api, /^200 /);
    // …but not for the window's methods and events.
    assert.match(tried.conversations, /^refused/);
    assert.match(tried.settings, /^refused/);
    assert.equal(tried.events, 'refused');

    // A frame of the window stays empty: the browser refuses to show it.
    await page.evaluate((ui) => {
      const frame = document.createElement('iframe');
      frame.src = ui + '/';
      frame.width = '800';
      frame.height = '600';
      document.body.append(frame);
      return new Promise((loaded) => (frame.onload = loaded));
    }, ui);
    const frame = page.frames().find((f) => f !== page.mainFrame());
    assert.ok(frame, 'the iframe is there');
    // The window, had it loaded, would show its version within seconds.
    await assert.rejects(frame.locator('[data-testid=version]').waitFor({ timeout: 3000 }), 'the window rendered inside another site\'s frame');
    assert.ok(
      policy.consoleErrors.some((e) => /frame-ancestors|X-Frame-Options/.test(e)),
      `the browser did not say it refused the frame: ${policy.consoleErrors.join(' | ')}`,
    );
    await page.close();
  } finally {
    await stopServer(server);
  }
});
