import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';
import { pasteAttachChars, pastedName } from '../lib/attachments.svelte';
import { AttachmentState, MaxUploadBytes, type Attachment } from '../lib/gen/service';

let backend: FakeBackend;

beforeEach(() => {
  backend = new FakeBackend();
});
afterEach(() => cleanup());

async function renderApp() {
  render(App, { backend });
  await screen.findByTestId('version');
}

function messageBox() {
  return screen.getByRole('textbox', { name: 'Message' }) as HTMLTextAreaElement;
}

function sendButton() {
  return screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement;
}

const stock: Attachment = {
  name: 'stock.csv',
  size: 12345,
  sha256: 'ab',
  format: 'csv',
  type: 'CSV table',
  pages: 0,
  pageUnit: '',
  tokens: 1234,
};

const report: Attachment = { ...stock, name: 'report.pdf', type: 'PDF document', pages: 3, pageUnit: 'pages', size: 2_500_000 };

/** Uploads files through the paperclip's file input; returns their ids. */
async function upload(...names: string[]): Promise<string[]> {
  const input = screen.getByTestId('file-input') as HTMLInputElement;
  const files = names.map((n) => new File(['iris,42\n'], n, { type: 'text/csv' }));
  const before = backend.pending.size;
  await fireEvent.change(input, { target: { files } });
  await waitFor(() => expect(backend.pending.size).toBe(before + names.length));
  return [...backend.pending.keys()].slice(before);
}

describe('attachments', () => {
  it('shows a chip per uploaded file: reading, then name, size, pages and tokens; removable', async () => {
    await renderApp();
    const [csv, pdf] = await upload('stock.csv', 'report.pdf');
    expect(backend.ui.AttachData).toHaveBeenCalledWith('stock.csv', btoa('iris,42\n'));
    const chips = await screen.findAllByTestId('attachment-chip');
    expect(chips.map((c) => c.dataset.state)).toEqual(['reading', 'reading']);

    await fireEvent.input(messageBox(), { target: { value: 'How many irises?' } });
    expect(sendButton().disabled).toBe(true); // not while documents are read
    expect(screen.getByTestId('send-blocked').textContent).toBe('Send is ready when the documents are read.');

    backend.finishAttachment(csv, stock);
    backend.finishAttachment(pdf, report);
    await waitFor(() => expect(screen.getAllByTestId('attachment-details').map((d) => d.textContent)).toEqual([
      '12.3 KB · 1,234 tokens',
      '2.5 MB · 3 pages · 1,234 tokens',
    ]));
    expect(sendButton().disabled).toBe(false);

    await fireEvent.click(screen.getByRole('button', { name: 'Remove report.pdf' }));
    expect(backend.ui.RemoveAttachment).toHaveBeenCalledWith(pdf);
    expect(screen.getAllByTestId('attachment-chip')).toHaveLength(1);

    await fireEvent.click(sendButton());
    await waitFor(() => expect(backend.ui.Send).toHaveBeenCalled());
    expect(backend.ui.Send).toHaveBeenCalledWith(expect.objectContaining({ text: 'How many irises?', attachments: [csv], keep: '' }));
    // The chip moves from the composer to the question.
    await waitFor(() => expect(screen.getAllByTestId('message')[0].textContent).toContain('stock.csv'));
    expect(screen.queryByRole('list', { name: 'Attachments' })).toBeNull();
  });

  it('says why a file cannot be read, and will not send it', async () => {
    await renderApp();
    const [id] = await upload('photo.png');
    const message = "is a PNG image (image/png); images can't be attached yet";
    backend.finishAttachment(id, message);
    expect((await screen.findByTestId('attachment-error')).textContent).toBe(message);
    await fireEvent.input(messageBox(), { target: { value: 'What is in it?' } });
    expect(sendButton().disabled).toBe(true);
    // The disabled Send says why, on the control and beside it.
    const reason = 'Remove photo.png to send: it could not be read.';
    expect(screen.getByTestId('send-blocked').textContent).toBe(reason);
    expect(sendButton().title).toBe(reason);
    expect(sendButton().getAttribute('aria-describedby')).toBe('send-blocked');
    await fireEvent.click(screen.getByRole('button', { name: 'Remove photo.png' }));
    expect(sendButton().disabled).toBe(false);
    expect(screen.queryByTestId('send-blocked')).toBeNull();
    expect(sendButton().title).toBe('');
  });

  it.each([
    ['Keep the beginning', 'beginning'],
    ['Keep the end', 'end'],
  ])('asks before sending documents too long for the context: %s', async (button, keep) => {
    backend.fit = {
      fits: false,
      message: 'The documents need 9,000 tokens, but only 2,000 of the 4,096-token context are left: 7,000 tokens too many.',
      contextTokens: 4096,
      conversationTokens: 72,
      answerTokens: 1024,
      documentTokens: 9000,
      availableTokens: 3000,
      overTokens: 6000,
      noRoom: false,
    };
    await renderApp();
    const [id] = await upload('big.txt');
    backend.finishAttachment(id, { ...stock, name: 'big.txt', tokens: 9000 });
    await screen.findByTestId('attachment-details');
    await fireEvent.input(messageBox(), { target: { value: 'Summarise' } });
    await fireEvent.click(sendButton());

    const dialog = await screen.findByTestId('fit-dialog');
    expect(dialog.textContent).toContain(backend.fit.message);
    expect(screen.getByTestId('fit-documents').textContent).toBe('9,000 tokens');
    expect(screen.getByTestId('fit-available').textContent).toBe('3,000 tokens');
    expect(backend.ui.Send).not.toHaveBeenCalled();
    await waitFor(() => expect(messageBox().value).toBe('Summarise'));

    await fireEvent.click(screen.getByRole('button', { name: button }));
    await waitFor(() => expect(backend.ui.Send).toHaveBeenCalledWith(expect.objectContaining({ attachments: [id], keep })));
    await waitFor(() => expect(screen.queryByTestId('fit-dialog')).toBeNull());
    expect(messageBox().value).toBe('');
    await waitFor(() => expect(screen.getAllByTestId('message')[0].textContent).toContain(`cut to the ${keep}`));
  });

  it('cancel leaves the question and the documents as they were', async () => {
    backend.fit = { ...backend.fit, fits: false, message: 'too many', overTokens: 5 };
    await renderApp();
    const [id] = await upload('big.txt');
    backend.finishAttachment(id, stock);
    await screen.findByTestId('attachment-details');
    await fireEvent.input(messageBox(), { target: { value: 'Summarise' } });
    await fireEvent.click(sendButton());
    await screen.findByTestId('fit-dialog');
    await fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByTestId('fit-dialog')).toBeNull();
    expect(backend.ui.Send).not.toHaveBeenCalled();
    await waitFor(() => expect(messageBox().value).toBe('Summarise'));
    expect(screen.getAllByTestId('attachment-chip')).toHaveLength(1);
  });

  it('offers only Cancel when the conversation leaves no room', async () => {
    backend.fit = { ...backend.fit, fits: false, noRoom: true, availableTokens: -10, message: 'Start a new conversation' };
    await renderApp();
    const [id] = await upload('big.txt');
    backend.finishAttachment(id, stock);
    await screen.findByTestId('attachment-details');
    await fireEvent.input(messageBox(), { target: { value: 'Summarise' } });
    await fireEvent.click(sendButton());
    await screen.findByTestId('fit-dialog');
    expect(screen.queryByRole('button', { name: 'Keep the end' })).toBeNull();
    expect(screen.getByTestId('fit-available').textContent).toBe('0 tokens');
  });

  it('turns a long paste into an attachment and keeps a short one as text', async () => {
    await renderApp();
    const long = 'x'.repeat(pasteAttachChars + 1);
    await fireEvent.paste(messageBox(), { clipboardData: { files: [], getData: () => long } });
    await waitFor(() => expect(backend.ui.AttachData).toHaveBeenCalledWith(pastedName, btoa(long)));
    await fireEvent.paste(messageBox(), { clipboardData: { files: [], getData: () => 'short' } });
    expect(backend.ui.AttachData).toHaveBeenCalledTimes(1);
  });

  it('shows the documents of a reopened conversation', async () => {
    const c = backend.addConversation('Stock', ['How many irises?']);
    backend.messages[0].attachments = [stock];
    await renderApp();
    await fireEvent.click(await screen.findByText('Stock'));
    await waitFor(() => expect(screen.getAllByTestId('attachment-details').map((d) => d.textContent)).toEqual([
      '12.3 KB · 1,234 tokens',
    ]));
    expect(c.id).toBeGreaterThan(0);
  });
});

describe('attachment events', () => {
  it('keeps a chip read before the call that attached it returned', async () => {
    await renderApp();
    backend.ui.AttachData = vi.fn(async (name: string) => {
      const view = { id: 'early', name, state: AttachmentState.Reading };
      backend.pending.set(view.id, view);
      backend.finishAttachment(view.id, stock); // the event overtakes the answer
      return view;
    });
    await upload('stock.csv');
    await waitFor(() => expect(screen.getByTestId('attachment-chip').dataset.state).toBe('ready'));
    await new Promise((r) => setTimeout(r, 20));
    expect(screen.getByTestId('attachment-chip').dataset.state).toBe('ready');
  });

  it('refuses a file over the upload limit before uploading it, saying the limit', async () => {
    await renderApp();
    const input = screen.getByTestId('file-input') as HTMLInputElement;
    const big = new File(['x'], 'scan.pdf', { type: 'application/pdf' });
    Object.defineProperty(big, 'size', { value: MaxUploadBytes + 1 });
    await fireEvent.change(input, { target: { files: [big] } });
    const alert = await screen.findByText(/scan\.pdf is 25\.1 MB: the window attaches files of up to 25\.1 MB/);
    expect(alert).toBeTruthy();
    expect(backend.ui.AttachData).not.toHaveBeenCalled();
  });

  it('takes files dropped anywhere on the window, with an overlay saying what will happen', async () => {
    await renderApp();
    const file = new File(['iris,42\n'], 'stock.csv', { type: 'text/csv' });
    const dataTransfer = { types: ['Files'], files: [file], dropEffect: 'none' };
    // Far from the composer: the header.
    const far = screen.getByTestId('version');
    expect(screen.queryByTestId('drop-overlay')).toBeNull();
    await fireEvent.dragEnter(far, { dataTransfer });
    await fireEvent.dragOver(far, { dataTransfer });
    const overlay = await screen.findByTestId('drop-overlay');
    expect(overlay.textContent).toContain('Drop to attach to this message');
    expect(overlay.textContent).toContain('PDF, Word, Excel');
    // Crossing into a child and back keeps it; leaving the window hides it.
    await fireEvent.dragEnter(messageBox(), { dataTransfer });
    await fireEvent.dragLeave(far, { dataTransfer });
    expect(screen.queryByTestId('drop-overlay')).not.toBeNull();
    await fireEvent.dragLeave(messageBox(), { dataTransfer });
    expect(screen.queryByTestId('drop-overlay')).toBeNull();
    // Dragged text is not a file: no overlay.
    await fireEvent.dragEnter(far, { dataTransfer: { types: ['text/plain'], files: [] } });
    expect(screen.queryByTestId('drop-overlay')).toBeNull();

    await fireEvent.dragEnter(far, { dataTransfer });
    await fireEvent.drop(far, { dataTransfer });
    expect(screen.queryByTestId('drop-overlay')).toBeNull();
    await waitFor(() => expect(backend.ui.AttachData).toHaveBeenCalledWith('stock.csv', btoa('iris,42\n')));
    expect(await screen.findAllByTestId('attachment-chip')).toHaveLength(1);
  });

  it('shows the message\'s token count and the context left under the box, once typing pauses', async () => {
    await renderApp();
    expect(screen.queryByTestId('token-count')).toBeNull();
    for (const value of ['How', 'How many', 'How many irises are there']) {
      await fireEvent.input(messageBox(), { target: { value } });
    }
    // The fake counts words as tokens, the prompt 10 more, in a 4,096-token context.
    await waitFor(() => expect(screen.getByTestId('token-count').textContent).toBe('5 tokens · 4,081 of 4,096 left'));
    expect(backend.ui.CountTokens).toHaveBeenCalledTimes(1);
    // A document read beside it counts too.
    const [id] = await upload('stock.csv');
    backend.finishAttachment(id, stock);
    await waitFor(() => expect(screen.getByTestId('token-count').textContent).toBe('5 tokens + 1,234 in documents · 2,847 of 4,096 left'));
  });

  it('lets a text file be read again from another encoding, from a menu on its chip', async () => {
    await renderApp();
    const [id, csv] = await upload('note.txt', 'report.pdf');
    const note: Attachment = { ...stock, name: 'note.txt', type: 'Plain text', format: 'text', tokens: 12 };
    backend.finishAttachment(id, note, 'GB18030');
    backend.finishAttachment(csv, report);
    const menu = (await screen.findByRole('combobox', { name: 'Encoding of note.txt' })) as HTMLSelectElement;
    // Only the text file has one.
    expect(screen.getAllByTestId('attachment-encoding')).toHaveLength(1);
    await waitFor(() => expect([...menu.options].map((o) => o.value)).toContain('Shift_JIS'));
    expect(menu.value).toBe('GB18030');

    await fireEvent.change(menu, { target: { value: 'Shift_JIS' } });
    await waitFor(() => expect(backend.ui.RereadAttachment).toHaveBeenCalledWith(id, 'Shift_JIS'));
    // The new chip takes the old one's place, being read, and the question waits for it.
    const chips = await screen.findAllByTestId('attachment-chip');
    expect(chips.map((c) => c.dataset.state)).toEqual(['reading', 'ready']);
    const [next] = [...backend.rereadAs.keys()];
    backend.finishAttachment(next, { ...note, tokens: 10 }, 'Shift_JIS');
    await waitFor(() => expect((screen.getByRole('combobox', { name: 'Encoding of note.txt' }) as HTMLSelectElement).value).toBe('Shift_JIS'));
    await fireEvent.input(messageBox(), { target: { value: 'Translate it' } });
    await fireEvent.click(sendButton());
    await waitFor(() => expect(backend.ui.Send).toHaveBeenCalledWith(expect.objectContaining({ attachments: [next, csv] })));
  });
  it('swaps the chip read again in place, even when its events come before the call answers', async () => {
    await renderApp();
    const [id, csv] = await upload('note.txt', 'report.pdf');
    const note: Attachment = { ...stock, name: 'note.txt', type: 'Plain text', format: 'text', tokens: 12 };
    backend.finishAttachment(id, note, 'GB18030');
    backend.finishAttachment(csv, report);
    const menu = (await screen.findByRole('combobox', { name: 'Encoding of note.txt' })) as HTMLSelectElement;
    await waitFor(() => expect([...menu.options].map((o) => o.value)).toContain('Shift_JIS'));
    // A small file is read again before the call returns: the new chip's
    // events (reading, then read) arrive first, as the service sends them.
    const reread = backend.ui.RereadAttachment;
    const chipCounts: number[] = [];
    const original = vi.mocked(reread).getMockImplementation()!;
    vi.mocked(reread).mockImplementationOnce(async (oldID: string, encoding: string) => {
      const view = await original(oldID, encoding);
      backend.emit({ type: 'attachment', attachment: view });
      await new Promise((r) => setTimeout(r, 0));
      chipCounts.push(screen.getAllByTestId('attachment-chip').length);
      backend.finishAttachment(view.id, { ...note, tokens: 10 }, 'Shift_JIS');
      await new Promise((r) => setTimeout(r, 0));
      chipCounts.push(screen.getAllByTestId('attachment-chip').length);
      return view;
    });
    await fireEvent.change(menu, { target: { value: 'Shift_JIS' } });
    await waitFor(() => expect(chipCounts).toHaveLength(2));
    const [next] = [...backend.rereadAs.keys()];
    // Two chips all along: the old one stood until the new one took its place, ready.
    expect(chipCounts).toEqual([2, 2]);
    await waitFor(() => expect(screen.getAllByTestId('attachment-chip').map((c) => c.dataset.state)).toEqual(['ready', 'ready']));
    await fireEvent.input(messageBox(), { target: { value: 'Translate it' } });
    await fireEvent.click(sendButton());
    await waitFor(() => expect(backend.ui.Send).toHaveBeenCalledWith(expect.objectContaining({ attachments: [next, csv] })));
  });
});
