// End-to-end tests of the window's look in headless Chromium against the
// real app (`suzuran serve` on the demo model, its own database and
// settings in a temporary folder):
//
//   - the first run offline: the hub's port closed, the welcome view says
//     it cannot be reached within 2 s and still shows the machine check;
//   - a Markdown showcase answer (headings, a table, code, a task list, a
//     quote, inline and display math) imported through Import…, with the
//     conversation's own settings, at 1440 and 800 px in both themes: the
//     table has borders, the math is MathML, the page never scrolls
//     sideways; the composer and the Thinking control line up with the
//     message column at 1440 px; the conversation's settings sheet shows
//     the imported settings and keeps an edit across a reload;
//   - axe-core (serious and critical, both themes) on each of these views.
//
//   SUZURAN=bin/suzuran node --test frontend/e2e/window.e2e.mjs
//
// Screenshots go to bin/e2e/ (E2E_SHOTS overrides), named 30- to 39-.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { checkAccessibility, killServers, openPage, startServe, stopServer } from './serve.mjs';

const root = resolve(import.meta.dirname, '../..');
const binary = resolve(root, process.env.SUZURAN ?? 'bin/suzuran');
const shots = resolve(root, process.env.E2E_SHOTS ?? 'bin/e2e');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const dir = mkdtempSync(join(tmpdir(), 'suzuran-window-e2e-'));
let browser;

/** Starts `suzuran serve` on a database and settings of its own under dir/name. */
function startServer(name, env = {}) {
  const home = join(dir, name);
  return startServe(
    binary,
    ['--addr', '127.0.0.1:0', '--db', join(home, 'suzuran.db'), '--settings', join(home, 'settings.json')],
    {
      ...process.env,
      XDG_CACHE_HOME: join(home, 'cache'),
      XDG_CONFIG_HOME: join(home, 'config'),
      HF_HOME: join(home, 'hf'),
      ...env,
    },
  );
}

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`) });
}

/** A TCP port that was free a moment ago and is closed now: connections to it are refused. */
function closedPort() {
  return new Promise((resolvePromise, reject) => {
    const l = createServer();
    l.on('error', reject);
    l.listen(0, '127.0.0.1', () => {
      const { port } = l.address();
      l.close(() => resolvePromise(port));
    });
  });
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

test('first run offline: the welcome view says so within 2 s and shows the machine check', async () => {
  // Not HF_HUB_OFFLINE: the app finds out for itself, as on a computer
  // without internet (a refused connection).
  const port = await closedPort();
  const server = await startServer('offline', { HF_ENDPOINT: `http://127.0.0.1:${port}`, HF_HUB_OFFLINE: '' });
  const context = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  const page = await context.newPage();
  try {
    const started = Date.now();
    await page.goto(server.url);
    const welcome = page.getByRole('region', { name: 'Get the model' });
    const problem = welcome.getByTestId('welcome-error');
    // 2 s is the promise to the user; the answer takes milliseconds, and
    // the page's own load is inside the bound too.
    await problem.waitFor({ timeout: 2_000 });
    const took = Date.now() - started;
    assert.ok(took <= 2_000, `the offline message came after ${took} ms`);
    assert.match(await problem.innerText(), /Hugging Face could not be reached/);
    assert.match(await problem.innerText(), new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port}`));
    const check = welcome.getByTestId('machine-check');
    await check.waitFor({ timeout: 1_000 });
    assert.ok((await check.locator('li').count()) > 0, 'the machine check lists no findings');
    assert.match(await welcome.getByTestId('machine-check-estimated').innerText(), /usual size/);
    assert.equal(await welcome.getByRole('heading', { name: 'Can this computer run it?' }).count(), 1);
    await shot(page, '30-welcome-offline');
    await checkAccessibility(page, 'welcome offline');
  } finally {
    await context.close();
    await stopServer(server);
  }
});

// The showcase: a conversation file (as Export as JSON writes it) whose
// answer holds every block the window renders, with its own settings; the
// desktop smoke test (app/smoke_test.go) opens the same file.
const showcaseFile = readFileSync(join(import.meta.dirname, 'testdata', 'showcase.json'), 'utf8');
const ownSettings = JSON.parse(showcaseFile).settings;

/** The left and right edges of an element's box, in CSS pixels. */
async function edges(locator) {
  const b = await locator.boundingBox();
  assert.ok(b, 'the element has no box');
  return { left: b.x, right: b.x + b.width };
}

test('Markdown showcase imported with its settings; the column lines up; the settings sheet', async () => {
  const server = await startServer('showcase', { HF_HUB_OFFLINE: '1' });
  const page = await openPage(browser, server.url);
  try {
    await page.setViewportSize({ width: 1440, height: 900 });
    // The first run opens the welcome view (offline: at once); leave it.
    const welcome = page.getByRole('region', { name: 'Get the model' });
    await welcome.getByTestId('welcome-error').waitFor();
    await welcome.getByRole('button', { name: 'Back to chat' }).click();
    await page.getByTestId('import-file').setInputFiles({ name: 'showcase.json', mimeType: 'application/json', buffer: Buffer.from(showcaseFile) });
    const answer = page.getByTestId('message').nth(1);
    await answer.locator('table').waitFor();
    assert.match(await page.locator('header .title').innerText(), /Sorting algorithms compared/);

    // The table: a border on every cell, a header row.
    const cells = await answer.locator('th, td').evaluateAll((els) =>
      els.map((el) => {
        const s = getComputedStyle(el);
        return { tag: el.tagName, top: parseFloat(s.borderTopWidth), style: s.borderTopStyle, left: parseFloat(s.borderLeftWidth), padding: parseFloat(s.paddingLeft) };
      }),
    );
    assert.equal(cells.filter((c) => c.tag === 'TH').length, 7);
    for (const c of cells) {
      assert.ok(c.top >= 1 && c.left >= 1 && c.style !== 'none' && c.padding >= 4, `a table cell without a border or padding: ${JSON.stringify(c)}`);
    }
    // Math as MathML, inline and in blocks; no TeX left as text.
    const maths = await answer.locator('math').evaluateAll((els) => els.map((el) => el.getAttribute('display') ?? 'inline'));
    assert.ok(maths.filter((d) => d === 'inline').length >= 10, `inline math: ${maths}`);
    assert.equal(maths.filter((d) => d === 'block').length, 2, `display math: ${maths}`);
    const text = await answer.innerText();
    assert.doesNotMatch(text, /\\log|\$\$|\\\[|\\frac/);
    // The rest of the blocks.
    assert.equal(await answer.locator('h1, h2, h3').count(), 4);
    assert.equal(await answer.locator('pre code').count(), 1);
    assert.equal(await answer.locator('blockquote').count(), 1);
    const tasks = await answer.locator('li.task .task-box').evaluateAll((els) => els.map((el) => el.getAttribute('aria-label')));
    assert.deepEqual(tasks, ['done', 'done', 'not done']);

    // The composer's box and the Thinking control line up with the
    // message column (1 px: the boxes' rounding).
    const column = await edges(page.locator('main.conversation ol'));
    const composer = await edges(page.locator('form.composer .row').first());
    const thinking = await edges(page.locator('.controls label.switch'));
    const width = column.right - column.left;
    assert.ok(width > 600 && width < 1440 - 400, `column ${JSON.stringify(column)}`);
    assert.ok(Math.abs(composer.left - column.left) <= 1 && Math.abs(composer.right - column.right) <= 1,
      `composer ${JSON.stringify(composer)}, column ${JSON.stringify(column)}`);
    assert.ok(Math.abs(thinking.left - column.left) <= 1, `Thinking control at ${thinking.left}, column at ${column.left}`);

    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    for (const [width, height] of [[1440, 900], [800, 600]]) {
      await page.setViewportSize({ width, height });
      for (const theme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: theme });
        assert.equal(await overflow(), 0, `the page scrolls sideways at ${width} px (${theme})`);
        await answer.locator('table').scrollIntoViewIfNeeded();
        await shot(page, `31-markdown-${width}-${theme}`);
      }
    }
    await page.emulateMedia({ colorScheme: null });
    // At 800 px the wide table scrolls inside the message, not the page.
    const wrap = await answer.locator('table').evaluate((t) => {
      const box = t.parentElement;
      return { scroll: box.scrollWidth, client: box.clientWidth, overflowX: getComputedStyle(box).overflowX };
    });
    assert.ok(wrap.overflowX === 'auto' || wrap.overflowX === 'scroll', `the table's box: ${JSON.stringify(wrap)}`);
    await page.setViewportSize({ width: 1440, height: 900 });
    await checkAccessibility(page, 'markdown answer');

    // The conversation's own settings came with the file.
    await page.getByTestId('chat-settings-button').click();
    const sheet = page.getByRole('dialog', { name: 'This conversation’s settings' });
    await sheet.waitFor();
    assert.equal(await sheet.getByLabel('System prompt').inputValue(), ownSettings.systemPrompt);
    assert.equal(await sheet.getByLabel('Thinking').inputValue(), 'off');
    assert.equal(await sheet.getByLabel('Sampling').inputValue(), 'coding');
    await shot(page, '32-chat-settings');
    await checkAccessibility(page, 'conversation settings sheet');
    await sheet.getByLabel('System prompt').fill('Answer in one paragraph.');
    await sheet.getByLabel('Sampling').selectOption('');
    await sheet.getByRole('button', { name: 'Save' }).click();
    await sheet.waitFor({ state: 'detached' });
    // The switch shows the conversation's thinking off.
    assert.equal(await page.getByRole('checkbox', { name: 'Thinking' }).isChecked(), false);

    // Export: the line saying where it went.
    await page.getByRole('button', { name: 'Export JSON' }).click();
    await page.locator('.exported').waitFor();
    await checkAccessibility(page, 'exported');

    // Kept in the database: a reload shows the edit.
    await page.reload();
    await page.getByTestId('version').waitFor();
    await page.getByRole('button', { name: /Sorting algorithms compared/ }).first().click();
    await page.getByTestId('chat-settings-button').click();
    await sheet.waitFor();
    assert.equal(await sheet.getByLabel('System prompt').inputValue(), 'Answer in one paragraph.');
    assert.equal(await sheet.getByLabel('Sampling').inputValue(), '');
    assert.equal(await sheet.getByLabel('Thinking').inputValue(), 'off');
    await page.keyboard.press('Escape');
    await sheet.waitFor({ state: 'detached' });
    assert.deepEqual(page.errors, []);
  } finally {
    await page.close();
    await stopServer(server);
  }
});
