// End-to-end test of documents in the chat window, in headless Chromium
// against the real app (`suzuran serve` on the demo model Suzuran Tiny, its
// own database and settings in a temporary folder): a PDF and a Word
// document, written by the test setup (testdocs.mjs), attached through the
// paperclip, shown as chips with the size, pages and token count that
// `suzuran extract` reports for the same files, and asked about; then
// documents longer than the context, each of the three choices. Run by
// `make e2e`:
//
//   SUZURAN=bin/suzuran node --test frontend/e2e/docs.e2e.mjs
//
// Screenshots go to bin/e2e/ (E2E_SHOTS overrides), named docs-*.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { checkAccessibility, killServers, openPage, startServe, stopServer } from './serve.mjs';
import { docxDocument, docxParagraph, docxTable, pdfDocument } from './testdocs.mjs';

const root = resolve(import.meta.dirname, '../..');
const binary = resolve(root, process.env.SUZURAN ?? 'bin/suzuran');
const shots = resolve(root, process.env.E2E_SHOTS ?? 'bin/e2e');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const dir = mkdtempSync(join(tmpdir(), 'suzuran-docs-e2e-'));
// The demo model installs into the cache folder, and settings live in the
// config folder: private ones, so that the model is the demo.
const env = { ...process.env, XDG_CACHE_HOME: join(dir, 'cache'), XDG_CONFIG_HOME: join(dir, 'config') };
let browser;

/** Starts `suzuran serve` (the API and the chat UI) with its own database and settings. */
function startServer(name, settings) {
  const settingsPath = join(dir, `${name}-settings.json`);
  writeFileSync(settingsPath, JSON.stringify({ welcome_seen: true, ...settings }));
  return startServe(binary, ['--addr', '127.0.0.1:0', '--db', join(dir, `${name}.db`), '--settings', settingsPath], env);
}

const newPage = (url) => openPage(browser, url);

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `docs-${name}.png`) });
}

/**
 * Writes each document to a file and reads it with `suzuran extract
 * --json`, the command-line path through the same extraction and the demo
 * model's tokenizer: the attachment record whose numbers its chip must
 * show, with blockTokens, the tokens of its document block (what the
 * budget check counts).
 */
function extracted(docs) {
  return Object.fromEntries(
    Object.entries(docs).map(([name, data]) => {
      const path = join(dir, name);
      writeFileSync(path, data);
      const out = JSON.parse(execFileSync(binary, ['extract', '--json', path], { env, encoding: 'utf8' }));
      return [name, { ...out.attachments[0], blockTokens: out.block_tokens }];
    }),
  );
}

/** The chip's details line for an attachment record, as the window writes it. */
function details(a) {
  const size = a.size < 1000 ? `${a.size} bytes` : a.size < 1e6 ? `${(a.size / 1000).toFixed(1)} KB` : `${(a.size / 1e6).toFixed(1)} MB`;
  const parts = [size];
  if (a.pages) parts.push(`${a.pages} ${a.page_unit}`);
  parts.push(`${a.tokens.toLocaleString('en-US')} tokens`);
  return parts.join(' · ');
}

/** Attaches files through the paperclip's file input and waits until every chip is read. */
async function attach(page, files) {
  await page.getByTestId('file-input').setInputFiles(files);
  const chips = page.getByRole('list', { name: 'Attachments' });
  for (const { name } of files) {
    await chips.locator(`[data-testid=attachment-chip][aria-label="${name}"]:not([data-state=reading])`).waitFor({ timeout: 30_000 });
  }
  return chips;
}

const pdfType = 'application/pdf';
const docxType = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
});

after(async () => {
  // A failed test leaves its server running: stop it, or node waits on it.
  killServers();
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('documents: a PDF and a Word document attached with the paperclip, their chips, a question answered', async () => {
  const pdf = pdfDocument([
    ['Lily of the valley (Convallaria majalis)', 'flowers in May, with small white bells.'],
    ['Page two: plant it in shade, in moist soil.'],
  ]);
  const docx = docxDocument(
    docxParagraph('Care sheet', 'Title') +
      docxParagraph('Water', 'Heading1') +
      docxParagraph('Keep the soil moist from April to June.') +
      docxTable([
        ['Plant', 'Height'],
        ['Lily of the valley', '20 cm'],
      ]),
  );
  const want = extracted({ 'lily.pdf': pdf, 'care.docx': docx });
  assert.equal(want['lily.pdf'].pages, 2);
  assert.match(want['lily.pdf'].text, /^--- Page 1 ---\nLily of the valley \(Convallaria majalis\)\n/);
  assert.match(want['care.docx'].text, /\| Lily of the valley \| 20 cm \|/);

  const server = await startServer('attach', {});
  const page = await newPage(server.url);

  // The paperclip is drawn (an SVG icon, not a glyph a font may lack).
  const clip = page.getByRole('button', { name: 'Attach documents' });
  const icon = await clip.locator('svg').boundingBox();
  assert.ok(icon && icon.width >= 10 && icon.height >= 10, `paperclip icon box ${JSON.stringify(icon)}`);
  await clip.screenshot({ path: join(shots, 'docs-00-paperclip.png') });

  const chips = await attach(page, [
    { name: 'lily.pdf', mimeType: pdfType, buffer: pdf },
    { name: 'care.docx', mimeType: docxType, buffer: docx },
  ]);
  for (const name of ['lily.pdf', 'care.docx']) {
    const chip = chips.getByRole('group', { name });
    assert.equal(await chip.getAttribute('data-state'), 'ready');
    assert.equal(await chip.getByTestId('attachment-details').innerText(), details(want[name]));
  }
  await shot(page, '01-pdf-docx-attached');

  await page.getByRole('textbox', { name: 'Message' }).fill('What does json.dumps do?');
  await page.keyboard.press('Enter');
  const reply = page.getByTestId('message').nth(1);
  await reply.getByTestId('stats').waitFor({ timeout: 60_000 });
  assert.equal(await reply.getAttribute('data-status'), 'complete');
  assert.match(await reply.getByTestId('answer').innerText(), /\S/);
  // The question keeps both documents, with the same numbers.
  const question = page.getByTestId('message').first();
  for (const name of ['lily.pdf', 'care.docx']) {
    assert.equal(await question.getByRole('group', { name }).getByTestId('attachment-details').innerText(), details(want[name]));
  }
  assert.equal(await page.getByRole('list', { name: 'Attachments' }).count(), 0);
  await shot(page, '02-pdf-docx-answer');
  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
});

test('documents: a PDF and a Word document longer than the context, each choice', async () => {
  // 512 tokens of context, of which 128 are kept for the answer: each
  // document below is several times what is left.
  const pageLines = (p) => Array.from({ length: 12 }, (_, i) => `Page ${p}, line ${i + 1}: lilies flower in the shade.`);
  const pdf = pdfDocument([pageLines(1), pageLines(2), pageLines(3)]);
  let body = docxParagraph('Garden journal', 'Title');
  for (let i = 1; i <= 40; i++) body += docxParagraph(`Entry ${i}: the lilies of the valley were watered.`);
  const docx = docxDocument(body);
  const want = extracted({ 'journal.pdf': pdf, 'journal.docx': docx });
  const server = await startServer('budget', { context_tokens: 512 });
  const page = await newPage(server.url);

  for (const [name, mimeType, buffer] of [
    ['journal.pdf', pdfType, pdf],
    ['journal.docx', docxType, docx],
  ]) {
    const original = want[name].tokens;
    assert.ok(original > 512, `${name}: ${original} tokens; want more than the context`);
    for (const [choice, kept] of [
      ['Cancel', null],
      ['Keep the beginning', 'beginning'],
      ['Keep the end', 'end'],
    ]) {
      await page.getByRole('button', { name: 'New chat' }).click();
      if ((await page.getByRole('list', { name: 'Attachments' }).count()) === 0) {
        const chips = await attach(page, [{ name, mimeType, buffer }]);
        assert.equal(await chips.getByRole('group', { name }).getByTestId('attachment-details').innerText(), details(want[name]));
      }
      await page.getByRole('textbox', { name: 'Message' }).fill('What happened in the garden?');
      await page.keyboard.press('Enter');
      const dialog = page.getByTestId('fit-dialog');
      await dialog.waitFor();
      assert.match(await dialog.innerText(), /tokens too many/);
      assert.equal(await dialog.getByTestId('fit-documents').innerText(), `${want[name].blockTokens.toLocaleString('en-US')} tokens`);
      const room = Number((await dialog.getByTestId('fit-available').innerText()).match(/^(\d+) tokens$/)[1]);
      assert.ok(room > 0 && room < 512 - 128, `room for documents: ${room} tokens`);
      if (kept === null) await shot(page, `03-${name.split('.')[1]}-too-long`);
      if (kept === null && name.endsWith('.docx')) await checkAccessibility(page, 'budget dialog');
      await dialog.getByRole('button', { name: choice }).click();
      await dialog.waitFor({ state: 'detached' });
      if (kept === null) {
        // Nothing sent, nothing lost: the question and the document stay.
        assert.equal(await page.getByRole('textbox', { name: 'Message' }).inputValue(), 'What happened in the garden?');
        assert.equal(await page.getByTestId('message').count(), 0);
        assert.equal(await page.getByRole('list', { name: 'Attachments' }).getByRole('group', { name }).count(), 1);
        continue;
      }
      const reply = page.getByTestId('message').nth(1);
      await reply.getByTestId('stats').waitFor({ timeout: 60_000 });
      assert.equal(await reply.getAttribute('data-status'), 'complete');
      const sent = await page.getByTestId('message').first().getByRole('group', { name }).getByTestId('attachment-details').innerText();
      const m = sent.match(new RegExp(`· (\\d+) tokens · cut to the ${kept} \\(of ${original.toLocaleString('en-US')}\\)$`));
      assert.ok(m, `${name}, ${choice}: chip says ${sent}`);
      assert.ok(Number(m[1]) <= room, `${name}, ${choice}: ${m[1]} tokens kept; room for ${room}`);
      await shot(page, `04-${name.split('.')[1]}-kept-${kept}`);
    }
  }
  assert.deepEqual(page.errors, []);
  await page.close();
  assert.equal(await stopServer(server), 0);
});
