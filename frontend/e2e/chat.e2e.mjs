// End-to-end test of the chat window in headless Chromium (playwright-core
// driving Debian's chromium) against the real app: `suzuran serve` on the
// demo model Suzuran Tiny, the API and the chat UI on one port, with its own
// database and settings in a temporary folder. Run by `make e2e` (part of
// `make test`):
//
//   SUZURAN=bin/suzuran node --test frontend/e2e/
//
// Screenshots of the main states go to bin/e2e/ (E2E_SHOTS overrides).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { checkAccessibility, killServers, openPage, startServe, stopServer } from './serve.mjs';

const root = resolve(import.meta.dirname, '../..');
const binary = resolve(root, process.env.SUZURAN ?? 'bin/suzuran');
const shots = resolve(root, process.env.E2E_SHOTS ?? 'bin/e2e');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const tinyModel = join(root, 'engine/internal/fixtures/testdata/qwen35moe-tiny/hf-bf16');

const dir = mkdtempSync(join(tmpdir(), 'suzuran-e2e-'));
const files = ['--db', join(dir, 'suzuran.db'), '--settings', join(dir, 'settings.json')];
let browser;
/** Starts `suzuran serve` on the test's database and settings. */
function startServer(extra = []) {
  return startServe(binary, ['--addr', '127.0.0.1:0', '--pace', '80ms', ...files, ...extra], {
    // The demo model installs into the cache folder: a private one.
    // Offline, the welcome view says so at once instead of asking Hugging Face.
    ...process.env,
    XDG_CACHE_HOME: join(dir, 'cache'),
    XDG_CONFIG_HOME: join(dir, 'config'),
    HF_HOME: join(dir, 'hf'),
    HF_HUB_OFFLINE: '1',
  });
}

const newPage = (url) => openPage(browser, url);

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`) });
}

/** Sends a message and waits for the reply to finish; returns the reply element. */
async function ask(page, text) {
  const before = await page.getByTestId('message').count();
  await page.getByRole('textbox', { name: 'Message' }).fill(text);
  await page.keyboard.press('Enter');
  await page.getByTestId('message').nth(before + 1).waitFor();
  const reply = page.getByTestId('message').nth(before + 1);
  await reply.locator('[data-testid=stats]').waitFor({ timeout: 30_000 });
  return reply;
}

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  killServers();
  rmSync(dir, { recursive: true, force: true });
});

test('chat on the demo model: stream, stop, regenerate, edit, conversations, restart', async () => {
  let server = await startServer();
  let page = await newPage(server.url);
  // The first run on the demo model opens the welcome view by itself
  // (offline here: it says so); leaving it goes to the chat.
  const welcome = page.getByRole('region', { name: 'Get the model' });
  await welcome.getByTestId('welcome-error').waitFor();
  await shot(page, '00-welcome-first-run');
  await checkAccessibility(page, 'welcome');
  await welcome.getByRole('button', { name: 'Back to chat' }).click();
  await welcome.waitFor({ state: 'detached' });
  assert.match(await page.getByTestId('demo-banner').innerText(), /Suzuran Tiny/);
  await shot(page, '01-empty');
  await checkAccessibility(page, 'empty chat');
  // At 800 px the demo notice takes one line, and the empty chat offers
  // questions the demo model answers.
  await page.setViewportSize({ width: 800, height: 600 });
  const bannerHeight = (await page.getByTestId('demo-banner').boundingBox()).height;
  assert.ok(bannerHeight < 48, `the demo notice is ${bannerHeight}px high at 800 px`);
  assert.ok((await page.getByRole('list', { name: 'Questions to try' }).getByRole('button').count()) >= 3);
  await shot(page, '01-empty-800');
  await page.setViewportSize({ width: 1100, height: 720 });

  // The message box grows with its lines, every line in view, up to a
  // third of the window; then it scrolls.
  const box = page.getByRole('textbox', { name: 'Message' });
  const heightOf = () => box.evaluate((el) => ({ client: el.clientHeight, scroll: el.scrollHeight }));
  const oneLine = await heightOf();
  await box.fill('one\ntwo\nthree\nfour');
  const fourLines = await heightOf();
  assert.ok(fourLines.client > oneLine.client * 1.8, `four lines: ${fourLines.client}px against ${oneLine.client}px for one`);
  assert.ok(fourLines.scroll <= fourLines.client + 2, `four lines clipped: ${JSON.stringify(fourLines)}`);
  await box.fill(Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n'));
  const many = await heightOf();
  assert.ok(many.client <= 720 / 3 + 4 && many.scroll > many.client, `forty lines: ${JSON.stringify(many)}`);
  await box.fill('');
  assert.equal((await heightOf()).client, oneLine.client);

  // Send and watch it stream: the answer grows over several updates. The
  // page itself records each length the answer shows, so that a slow
  // test machine cannot miss them.
  await page.evaluate(() => {
    const lengths = new Set();
    window.answerLengths = lengths;
    new MutationObserver(() => {
      const answer = document.querySelectorAll('[data-testid=message]')[1]?.querySelector('[data-testid=answer]');
      if (answer) lengths.add(answer.textContent.length);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.getByRole('textbox', { name: 'Message' }).fill('What does json.dumps do?');
  await page.keyboard.press('Enter');
  const reply = page.getByTestId('message').nth(1);
  const answer = reply.getByTestId('answer');

  // The API on the same port, at once: while the window's answer streams,
  // the page itself asks /v1/chat/completions (its own origin may). The
  // engine runs one request at a time, so the API's waits its turn; both
  // are answered, the window's below.
  await answer.filter({ hasText: /\S/ }).waitFor();
  const api = await page.evaluate(async () => {
    const windowStatus = document.querySelectorAll('[data-testid=message]')[1].getAttribute('data-status');
    const res = await fetch('/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'What does json.dumps do?' }], max_tokens: 8 }),
    });
    return { windowStatus, status: res.status, body: await res.json() };
  });
  assert.equal(api.windowStatus, 'streaming', 'the window\'s answer ended before the API call was made');
  assert.equal(api.status, 200, JSON.stringify(api.body));
  assert.equal(api.body.object, 'chat.completion');
  assert.equal(api.body.usage.completion_tokens, 8);
  assert.ok(api.body.choices[0].message.content.length > 0, JSON.stringify(api.body));

  await reply.getByTestId('stats').waitFor({ timeout: 30_000 });
  const steps = await page.evaluate(() => [...window.answerLengths].filter((n) => n > 0).length);
  assert.ok(steps >= 3, `the answer grew in ${steps} steps; want it seen streaming`);
  assert.equal(await reply.getAttribute('data-status'), 'complete');
  assert.match(await answer.innerText(), /JSON/i);
  assert.match(await reply.getByTestId('stats').innerText(), /tok\/s · \d+ tokens · first token/);
  await shot(page, '02-answer');
  await checkAccessibility(page, 'answer');

  // The system's dark theme, and the smallest window (420×360): nothing
  // spills sideways, and the message box stays on screen.
  await page.emulateMedia({ colorScheme: 'dark' });
  const background = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  const [r, g, b] = background.match(/\d+/g).map(Number);
  assert.ok(r + g + b < 3 * 64, `dark theme background ${background}`);
  await shot(page, '02-answer-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  // A narrow window folds the conversations into a drawer: closed by
  // itself, over a backdrop when opened, closed by Esc, the backdrop and a
  // choice.
  await page.setViewportSize({ width: 420, height: 360 });
  const drawerNav = page.getByRole('navigation', { name: 'Conversations' });
  await drawerNav.waitFor({ state: 'detached' });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  assert.ok(await page.getByRole('textbox', { name: 'Message' }).isVisible());
  await shot(page, '02-answer-small');
  const showList = page.getByRole('button', { name: 'Show conversations' });
  await showList.click();
  await page.getByTestId('drawer-backdrop').waitFor();
  await shot(page, '02-drawer-narrow');
  await page.keyboard.press('Escape');
  await drawerNav.waitFor({ state: 'detached' });
  await showList.click();
  await page.getByTestId('drawer-backdrop').click({ position: { x: 400, y: 200 } });
  await drawerNav.waitFor({ state: 'detached' });
  await showList.click();
  await drawerNav.locator('button.open').first().click();
  await drawerNav.waitFor({ state: 'detached' });
  await page.setViewportSize({ width: 1100, height: 720 });
  await drawerNav.waitFor();
  assert.equal(await page.getByTestId('drawer-backdrop').count(), 0);

  // Keyboard only: the skip link reaches the message box; the list is one
  // Tab stop walked with the arrow keys.
  // (The link is the first stop: Shift+Tab from the header's first button.)
  await page.getByRole('button', { name: 'Hide conversations' }).focus();
  await page.keyboard.press('Shift+Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the message box');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Message');

  // Stop: pressed while the answer streams, it ends marked stopped.
  await page.getByRole('textbox', { name: 'Message' }).fill('What does itertools.pairwise do?');
  await page.keyboard.press('Enter');
  const second = page.getByTestId('message').nth(3);
  await second.getByTestId('answer').filter({ hasText: /\S/ }).waitFor();
  await page.getByRole('button', { name: 'Stop' }).click();
  await second.getByText('Stopped.').waitFor();
  assert.equal(await second.getAttribute('data-status'), 'stopped');
  await shot(page, '03-stopped');

  // Regenerate the stopped answer: a complete one replaces it.
  await second.getByRole('button', { name: 'Regenerate' }).click();
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid=message]')[3]?.getAttribute('data-status') === 'complete',
  );
  assert.match(await page.getByTestId('message').nth(3).getByTestId('answer').innerText(), /pair/i);

  // Edit the first question and send it again: what followed it goes.
  await page.getByRole('button', { name: 'Edit and resend' }).first().click();
  await page.getByRole('textbox', { name: 'Edit message' }).fill('What does json.loads do?');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => {
    const items = document.querySelectorAll('[data-testid=message]');
    return items.length === 2 && items[1].getAttribute('data-status') === 'complete';
  });
  // The question before the edit stays, as version 1 of 2.
  assert.match(await page.getByTestId('message').first().innerText(), /^What does json\.loads do\?\nEdit\nCopy\n2\/2/);

  // Conversations: a second one, then rename, search, delete and undo.
  await page.getByRole('button', { name: 'New chat' }).click();
  await ask(page, 'What does collections.Counter do?');
  const nav = page.getByRole('navigation', { name: 'Conversations' });
  await nav.getByRole('button', { name: /^What does collections.Counter do\?/ }).waitFor();
  // Rename and Delete show on the item under the pointer.
  await nav.getByRole('button', { name: /^What does collections.Counter do\?/ }).hover();
  await nav.getByRole('button', { name: 'Rename What does collections.Counter do?' }).click();
  await nav.getByRole('textbox', { name: 'New title' }).fill('Counting things');
  await page.keyboard.press('Enter');
  await nav.getByRole('button', { name: 'Counting things', exact: true }).waitFor();

  await nav.getByRole('searchbox', { name: 'Search conversations' }).fill('loads');
  await nav.getByRole('button', { name: 'Counting things', exact: true }).waitFor({ state: 'detached' });
  assert.equal(await nav.getByRole('button', { name: /^What does json\.dumps/ }).count(), 1);
  await shot(page, '04-search');
  await nav.getByRole('searchbox', { name: 'Search conversations' }).fill('');
  await nav.getByRole('button', { name: 'Counting things', exact: true }).waitFor();

  await nav.getByRole('button', { name: /^Counting things/ }).hover();
  await nav.getByRole('button', { name: 'Delete Counting things' }).click();
  await nav.getByRole('button', { name: 'Counting things', exact: true }).waitFor({ state: 'detached' });
  await nav.getByRole('button', { name: 'Undo' }).click();
  await nav.getByRole('button', { name: 'Counting things', exact: true }).waitFor();

  // A setting, saved.
  await nav.getByRole('button', { name: 'Settings' }).click();
  const settings = page.getByRole('region', { name: 'Settings' });
  // The API is this server's, at the page's own address.
  assert.ok((await settings.getByTestId('served-api').innerText()).includes(server.url.replace(/\/$/, '')));
  // A browser has no global shortcut: the view says it is the macOS app's.
  assert.match(await settings.getByTestId('global-shortcut-unavailable').innerText(), /macOS app/);
  await settings.getByRole('textbox', { name: 'System prompt' }).fill('Answer in one sentence.');
  await settings.getByRole('button', { name: 'Save' }).click();
  await settings.getByText('Saved.').waitFor();
  await shot(page, '05-settings');
  await checkAccessibility(page, 'settings');
  // The API's port and origins save under serve without an error; the form
  // shows them as stored and says what a restart of serve takes.
  await settings.getByRole('spinbutton', { name: 'Port' }).fill('11999');
  await settings.getByRole('textbox', { name: /Allowed web origins/ }).fill(' http://localhost:3000/ ');
  await settings.getByRole('button', { name: 'Save' }).click();
  await settings.getByTestId('serve-restart').waitFor();
  assert.equal(await page.getByRole('alert').count(), 0);
  assert.equal(await settings.getByRole('textbox', { name: /Allowed web origins/ }).inputValue(), 'http://localhost:3000');
  assert.match(await settings.getByTestId('serve-restart').innerText(), /suzuran serve --addr 127\.0\.0\.1:11999 --cors http:\/\/localhost:3000/);
  await settings.getByTestId('serve-restart').scrollIntoViewIfNeeded();
  await shot(page, '05-settings-serve-restart');
  // The boxes in the dark theme: the theme's borders, the heading first.
  await page.emulateMedia({ colorScheme: 'dark' });
  await settings.evaluate((el) => (el.scrollTop = 0));
  await shot(page, '05-settings-dark');
  await page.emulateMedia({ colorScheme: null });
  assert.deepEqual(page.errors, []);
  await page.close();

  // Restart the server: the conversations, their messages and the setting
  // are all still there.
  assert.equal(await stopServer(server), 0);
  server = await startServer();
  page = await newPage(server.url);
  // The welcome view, left once, does not open by itself again.
  await page.getByTestId('demo-banner').waitFor();
  assert.equal(await page.getByRole('region', { name: 'Get the model' }).count(), 0);
  const nav2 = page.getByRole('navigation', { name: 'Conversations' });
  await nav2.getByRole('button', { name: 'Counting things', exact: true }).waitFor();
  await nav2.getByRole('button', { name: /^What does json\.dumps/ }).click();
  await page.getByText('What does json.loads do?').waitFor();
  assert.equal(await page.getByTestId('message').count(), 2);
  await nav2.getByRole('button', { name: 'Settings' }).click();
  assert.equal(
    await page.getByRole('region', { name: 'Settings' }).getByRole('textbox', { name: 'System prompt' }).inputValue(),
    'Answer in one sentence.',
  );
  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
});

test('versions of an answer, export and import, jump to the latest', async () => {
  // A database and settings of its own: a first run, on the same demo model.
  const own = mkdtempSync(join(tmpdir(), 'suzuran-e2e-versions-'));
  const server = await startServe(binary, ['--addr', '127.0.0.1:0', '--pace', '10ms',
    '--db', join(own, 'suzuran.db'), '--settings', join(own, 'settings.json')], {
    ...process.env,
    XDG_CACHE_HOME: join(dir, 'cache'),
    XDG_CONFIG_HOME: join(own, 'config'),
    HF_HOME: join(dir, 'hf'),
    HF_HUB_OFFLINE: '1',
  });
  const page = await newPage(server.url);
  const welcome = page.getByRole('region', { name: 'Get the model' });
  await welcome.getByRole('button', { name: 'Back to chat' }).click();
  await welcome.waitFor({ state: 'detached' });

  // Regenerate keeps the first answer as version 1 of 2.
  const reply = await ask(page, 'What does json.dumps do?');
  const firstText = await reply.getByTestId('answer').innerText();
  await reply.getByRole('button', { name: 'Regenerate' }).click();
  await reply.getByTestId('version-label').filter({ hasText: '2/2' }).waitFor();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=message]')[1]?.getAttribute('data-status') === 'complete');
  await reply.getByTestId('stats').waitFor();
  await shot(page, '20-versions-2-of-2');
  await reply.getByRole('button', { name: 'Previous version of this answer' }).click();
  await reply.getByTestId('version-label').filter({ hasText: '1/2' }).waitFor();
  assert.equal(await reply.getByTestId('answer').innerText(), firstText);
  // On hover: when, and by which model.
  await reply.hover();
  const meta = reply.getByTestId('meta');
  assert.match(await meta.innerText(), /Suzuran Tiny/);
  // Shown on hover (after a short fade).
  await page.waitForFunction((el) => getComputedStyle(el).opacity === '1', await meta.elementHandle());
  await shot(page, '20-versions-1-of-2');
  await checkAccessibility(page, 'versions');
  // The next question goes on from the version shown, which stays 1/2.
  await ask(page, 'And json.loads?');
  assert.equal(await reply.getByTestId('version-label').innerText(), '1/2');

  // Export: a download in the browser, Markdown of the branch shown and
  // JSON of every version.
  const exportAs = async (name) => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name }).click()]);
    return { name: download.suggestedFilename(), path: await download.path() };
  };
  const md = await exportAs('Export Markdown');
  assert.equal(md.name, 'What does json.dumps do.md');
  const mdText = readFileSync(md.path, 'utf8');
  assert.ok(mdText.startsWith('# What does json.dumps do?') && mdText.includes('And json.loads?'), mdText);
  const js = await exportAs('Export JSON');
  const exported = JSON.parse(readFileSync(js.path, 'utf8'));
  assert.equal(exported.format, 'suzuran.conversation');
  assert.equal(exported.messages.length, 5, 'two questions, three answers');
  await page.getByText('Downloaded What does json.dumps do.json').waitFor();

  // Import it: a new conversation, with both versions of the first answer.
  const nav = page.getByRole('navigation', { name: 'Conversations' });
  await page.getByTestId('import-file').setInputFiles(js.path);
  await page.waitForFunction(() => document.querySelectorAll('nav button.open').length === 2);
  await page.getByText('And json.loads?').waitFor();
  assert.equal(await page.getByTestId('message').count(), 4);
  assert.equal(await page.getByTestId('message').nth(1).getByTestId('version-label').innerText(), '1/2');
  await shot(page, '21-imported');
  // A file that is not an export is refused, and nothing is added.
  await page.getByTestId('import-file').setInputFiles({ name: 'broken.json', mimeType: 'application/json', buffer: Buffer.from('{"format": "suzuran.conv') });
  await page.getByRole('alert').filter({ hasText: 'cannot be imported: it is not valid JSON' }).waitFor();
  await shot(page, '21-import-refused');
  assert.equal(await nav.locator('button.open').count(), 2);
  await page.getByRole('alert').getByRole('button', { name: 'Dismiss' }).click();

  // Scrolled up in a long conversation, a button jumps to the latest.
  for (const q of ['What does os.path.join do?', 'What does itertools.pairwise do?', 'What does collections.Counter do?']) {
    await ask(page, q);
  }
  await page.setViewportSize({ width: 800, height: 420 });
  const list = page.getByRole('main', { name: 'Conversation' });
  await list.evaluate((el) => el.scrollTo({ top: 0 }));
  const jump = page.getByTestId('jump-latest');
  await jump.waitFor();
  await shot(page, '22-jump-to-latest');
  await jump.click();
  await jump.waitFor({ state: 'detached' });
  await page.waitForFunction(() => {
    const el = document.querySelector('main.conversation');
    return el.scrollHeight - el.scrollTop - el.clientHeight < 4;
  });
  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
  rmSync(own, { recursive: true, force: true });
});

test('the server lost mid-answer: interrupted, reconnecting, then back by itself', async () => {
  const server = await startServer(['--pace', '250ms']);
  const port = new URL(server.url).port;
  const page = await newPage(server.url);
  const back = page.getByRole('button', { name: 'Back to chat' });
  if (await back.count()) await back.click();
  await page.getByRole('textbox', { name: 'Message' }).fill('What does collections.Counter do?');
  await page.keyboard.press('Enter');
  const reply = page.getByTestId('message').nth(1);
  await reply.getByTestId('answer').filter({ hasText: /\S/ }).waitFor();
  // The server dies as a crash would end it.
  server.child.kill('SIGKILL');
  await page.getByTestId('reconnecting').waitFor({ timeout: 15_000 });
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=message]')[1]?.getAttribute('data-status') === 'interrupted');
  assert.equal(await page.getByRole('button', { name: 'Stop' }).count(), 0);
  await shot(page, '11-server-lost');

  // Back on the same port: the window reconnects by itself and reads the
  // model's state and the conversation again.
  const again = await startServer(['--addr', `127.0.0.1:${port}`]);
  await page.getByTestId('reconnecting').waitFor({ state: 'detached', timeout: 20_000 });
  await page.waitForFunction(() => /Suzuran Tiny/.test(document.querySelector('[data-testid=model-state]')?.textContent ?? ''));
  assert.equal(await page.getByTestId('message').nth(1).getAttribute('data-status'), 'interrupted');
  const next = await ask(page, 'What does json.dumps do?');
  assert.equal(await next.getAttribute('data-status'), 'complete');
  await shot(page, '12-server-back');
  assert.deepEqual(page.errors, []);
  await page.close();
  await stopServer(again);
});

test('thinking on the tiny fixture model: the switch, live thoughts, then collapsed', async () => {
  const server = await startServer(['--model', tinyModel]);
  const page = await newPage(server.url);
  const think = page.getByRole('checkbox', { name: 'Thinking' });
  assert.equal(await think.isDisabled(), false);
  if (!(await think.isChecked())) await think.check();
  await page.getByRole('textbox', { name: 'Message' }).fill('Think about it');
  await page.keyboard.press('Enter');
  const reply = page.getByTestId('message').nth(1);
  // While the model thinks, its thoughts show, open.
  await reply.locator('details[open] [data-testid=thinking]').waitFor();
  await shot(page, '06-thinking');
  await checkAccessibility(page, 'thinking');
  await page.keyboard.press('Escape');
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid=message]')[1]?.getAttribute('data-status') !== 'streaming',
  );

  // Off: the next answer has no thoughts.
  await think.uncheck();
  await page.getByRole('button', { name: 'New chat' }).click();
  await page.getByRole('textbox', { name: 'Message' }).fill('Answer at once');
  await page.keyboard.press('Enter');
  const plain = page.getByTestId('message').nth(1);
  await page.waitForTimeout(500);
  await page.keyboard.press('Escape');
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid=message]')[1]?.getAttribute('data-status') !== 'streaming',
  );
  assert.equal(await plain.getByTestId('thinking').count(), 0);
  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
});

/** A 1×1 PNG: a file type the model cannot read. */
const pngPixel = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

/** Attaches a file through the paperclip's file input and returns its chip once read. */
async function attach(page, name, mimeType, content) {
  await page.getByTestId('file-input').setInputFiles({ name, mimeType, buffer: Buffer.from(content) });
  const chips = page.getByRole('list', { name: 'Attachments' });
  await chips.locator(`[data-testid=attachment-chip][aria-label="${name}"]:not([data-state=reading])`).waitFor({ timeout: 30_000 });
  return chips.getByRole('group', { name });
}

test('documents: attach a CSV and ask, an image refused, a document too long for the context, reopened after a restart', async () => {
  // A small context (512 tokens) so that a short log does not fit.
  const settingsPath = join(dir, 'attach-settings.json');
  // The welcome view was left in the first test's settings, not these.
  writeFileSync(settingsPath, JSON.stringify({ context_tokens: 512, welcome_seen: true }));
  const own = ['--db', join(dir, 'attach.db'), '--settings', settingsPath];
  let server = await startServer(own);
  let page = await newPage(server.url);

  const csv = await attach(page, 'stock.csv', 'text/csv', 'flower,stock\niris,42\ntulip,7\n');
  assert.match(await csv.getByTestId('attachment-details').innerText(), /^29 bytes · \d+ tokens$/);
  const tokens = (await csv.getByTestId('attachment-details').innerText()).match(/(\d+) tokens/)[1];
  await shot(page, '07-attached');
  await checkAccessibility(page, 'attached document');
  const reply = await ask(page, 'How many irises are in stock?');
  assert.equal(await reply.getAttribute('data-status'), 'complete');
  const question = page.getByTestId('message').first();
  assert.match(await question.getByTestId('attachment-details').innerText(), new RegExp(`· ${tokens} tokens$`));
  assert.equal(await page.getByRole('list', { name: 'Attachments' }).count(), 0);

  // An image: refused with its type named, never dropped silently.
  const image = await attach(page, 'photo.png', 'image/png', pngPixel);
  assert.match(await image.getByTestId('attachment-error').innerText(), /^is a PNG image.*images can't be attached yet/);
  assert.equal(await page.getByRole('button', { name: 'Send', exact: true }).isDisabled(), true);
  await shot(page, '08-image-refused');
  await image.getByRole('button', { name: 'Remove photo.png' }).click();

  // A log longer than the context: asked before sending, each choice works.
  const log = Array.from({ length: 300 }, (_, i) => `line ${i + 1} of the log`).join('\n') + '\n';
  for (const [choice, kept] of [
    ['Cancel', null],
    ['Keep the beginning', 'beginning'],
    ['Keep the end', 'end'],
  ]) {
    await page.getByRole('button', { name: 'New chat' }).click();
    if ((await page.getByRole('list', { name: 'Attachments' }).count()) === 0) await attach(page, 'big.log', 'text/plain', log);
    await page.getByRole('textbox', { name: 'Message' }).fill('What happened?');
    await page.keyboard.press('Enter');
    const dialog = page.getByTestId('fit-dialog');
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /tokens too many/);
    if (kept === null) await shot(page, '09-too-long');
    await dialog.getByRole('button', { name: choice }).click();
    await dialog.waitFor({ state: 'detached' });
    if (kept === null) {
      assert.equal(await page.getByRole('textbox', { name: 'Message' }).inputValue(), 'What happened?');
      assert.equal(await page.getByTestId('message').count(), 0);
      continue;
    }
    await page.getByTestId('message').nth(1).locator('[data-testid=stats]').waitFor({ timeout: 30_000 });
    assert.match(await page.getByTestId('message').first().getByTestId('attachment-details').innerText(), new RegExp(`cut to the ${kept}`));
  }
  assert.deepEqual(page.errors, []);
  await page.close();

  // After a restart the first conversation still shows its document.
  assert.equal(await stopServer(server), 0);
  server = await startServer(own);
  page = await newPage(server.url);
  await page.getByRole('navigation', { name: 'Conversations' }).getByRole('button', { name: /^How many irises/ }).click();
  const reopened = page.getByTestId('message').first();
  await reopened.getByRole('group', { name: 'stock.csv' }).waitFor();
  assert.match(await reopened.getByTestId('attachment-details').innerText(), new RegExp(`^29 bytes · ${tokens} tokens$`));
  await shot(page, '10-reopened');
  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
});

test('composer: the count while typing, why Send waits, a drop anywhere, a text file read again from another encoding, the model menu', async () => {
  const settingsPath = join(dir, 'composer-settings.json');
  writeFileSync(settingsPath, JSON.stringify({ welcome_seen: true }));
  const server = await startServer(['--db', join(dir, 'composer.db'), '--settings', settingsPath]);
  const page = await newPage(server.url);
  const box = page.getByRole('textbox', { name: 'Message' });

  // The count, by the model's own tokenizer, once typing pauses.
  await box.fill('What does os.path.join do?');
  const count = page.getByTestId('token-count');
  await count.waitFor();
  assert.match(await count.innerText(), /^\d+ tokens · [\d,]+ of [\d,]+ left$/);

  // A refused file: Send says why it waits.
  const image = await attach(page, 'photo.png', 'image/png', pngPixel);
  const send = page.getByRole('button', { name: 'Send', exact: true });
  assert.equal(await send.isDisabled(), true);
  assert.equal(await page.getByTestId('send-blocked').innerText(), 'Remove photo.png to send: it could not be read.');
  assert.equal(await send.getAttribute('aria-describedby'), 'send-blocked');
  await shot(page, '11-send-blocked');
  await image.getByRole('button', { name: 'Remove photo.png' }).click();
  assert.equal(await send.isDisabled(), false);

  // Files dragged over the header: the overlay says what a drop does, and
  // the drop attaches. "Ландыш майский" in KOI8-R.
  const koi8 = [0xec, 0xc1, 0xce, 0xc4, 0xd9, 0xdb, 0x20, 0xcd, 0xc1, 0xca, 0xd3, 0xcb, 0xc9, 0xca, 0x0a];
  const transfer = await page.evaluateHandle((bytes) => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(bytes)], 'notes.txt', { type: 'text/plain' }));
    return dt;
  }, koi8);
  const header = page.locator('header');
  await header.dispatchEvent('dragenter', { dataTransfer: transfer });
  await header.dispatchEvent('dragover', { dataTransfer: transfer });
  const overlay = page.getByTestId('drop-overlay');
  await overlay.waitFor();
  assert.match(await overlay.innerText(), /Drop to attach to this message/);
  await shot(page, '12-drop-overlay');
  await header.dispatchEvent('drop', { dataTransfer: transfer });
  await overlay.waitFor({ state: 'detached' });
  const chips = page.getByRole('list', { name: 'Attachments' });
  await chips.locator('[data-testid=attachment-chip][aria-label="notes.txt"][data-state=ready]').waitFor({ timeout: 30_000 });

  // Read again as KOI8-R from the chip's menu.
  const encoding = page.getByRole('combobox', { name: 'Encoding of notes.txt' });
  assert.notEqual(await encoding.inputValue(), 'KOI8-R');
  await encoding.selectOption('KOI8-R');
  // The chip read again replaces the first one: one chip, ready, read as
  // KOI8-R (the two may stand side by side for a moment while it swaps).
  await page.waitForFunction(
    () => {
      const all = document.querySelectorAll('[data-testid=attachment-chip]');
      return all.length === 1 && all[0].getAttribute('data-state') === 'ready' &&
        all[0].querySelector('[data-testid=attachment-encoding]')?.value === 'KOI8-R';
    },
    null,
    { timeout: 30_000 },
  );
  // The count takes in the document read.
  await page.waitForFunction(() => / \+ \d+ in documents · /.test(document.querySelector('[data-testid=token-count]')?.textContent ?? ''));
  await shot(page, '13-encoding');
  await checkAccessibility(page, 'composer with a text file');

  // The model's name in the header opens the model menu.
  await page.getByTestId('model-state').click();
  const menu = page.getByRole('menu', { name: 'Models' });
  await menu.waitFor();
  const demo = menu.getByRole('menuitemradio', { name: /Suzuran Tiny \(demo\)/ });
  assert.equal(await demo.getAttribute('aria-checked'), 'true');
  await shot(page, '14-model-menu');
  await checkAccessibility(page, 'model menu');
  await page.keyboard.press('Escape');
  await menu.waitFor({ state: 'detached' });

  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
});
