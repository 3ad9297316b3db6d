import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';
import { formatDuration, versionNav } from '../lib/chat.svelte';
import { EventType, type Message } from '../lib/gen/service';

let backend: FakeBackend;

beforeEach(() => {
  backend = new FakeBackend();
});
afterEach(() => cleanup());

async function renderApp() {
  render(App, { backend });
  await screen.findByTestId('version');
}

async function ask(text: string): Promise<Message> {
  const box = screen.getByRole('textbox', { name: 'Message' });
  await fireEvent.input(box, { target: { value: text } });
  await fireEvent.keyDown(box, { key: 'Enter' });
  await waitFor(() => expect(backend.ui.Send).toHaveBeenCalled());
  return backend.messages.filter((m) => m.role === 'assistant').at(-1)!;
}

function lastReply(): Message {
  return backend.messages.filter((m) => m.role === 'assistant').at(-1)!;
}

const base = { conversationId: 1, role: 'assistant', content: '', reasoning: '', status: 'complete', createdAt: 0 };

describe('versionNav', () => {
  it('places a message among its versions', () => {
    expect(versionNav({ ...base, id: 5 })).toBeNull();
    expect(versionNav({ ...base, id: 5, versions: [5] })).toBeNull();
    expect(versionNav({ ...base, id: 5, versions: [2, 5, 9] })).toEqual({ index: 2, count: 3, prev: 2, next: 9 });
    expect(versionNav({ ...base, id: 2, versions: [2, 5] })).toEqual({ index: 1, count: 2, prev: null, next: 5 });
    expect(versionNav({ ...base, id: 5, versions: [2, 5] })).toEqual({ index: 2, count: 2, prev: 2, next: null });
  });
  it('says durations shortly', () => {
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(3200)).toBe('3.2 s');
    expect(formatDuration(65_000)).toBe('1 min 5 s');
  });
});

describe('versions of answers and questions', () => {
  it('keeps a regenerated answer as version 1/2 and browses back to it', async () => {
    await renderApp();
    backend.stream(await ask('What does json.dumps do?'), [{ content: 'First answer' }]);
    await screen.findByText('First answer');
    // The new reply's event comes while the reload is on its way, as it
    // may over the network: the window keeps its copy, and the reload's
    // versions.
    const read = backend.ui.Conversation;
    backend.ui.Conversation = vi.fn(async (id: number) => {
      const view = await read(id);
      const r = lastReply();
      backend.emit({ type: EventType.Message, conversationId: id, messageId: r.id, message: { ...r } });
      return view;
    });
    await fireEvent.click(screen.getByRole('button', { name: 'Regenerate' }));
    await waitFor(() => expect(backend.ui.Regenerate).toHaveBeenCalled());
    // Numbered at once, while the new answer is written.
    await waitFor(() => expect(screen.getByTestId('version-label').textContent).toBe('2/2'));
    backend.stream(lastReply(), [{ content: 'Second answer' }]);
    await screen.findByText('Second answer');
    // The nav stays after the answer ends, though its events do not carry it.
    expect(screen.getByTestId('version-label').textContent).toBe('2/2');
    await fireEvent.click(screen.getByRole('button', { name: 'Previous version of this answer' }));
    await screen.findByText('First answer');
    expect(screen.queryByText('Second answer')).toBeNull();
    expect(screen.getByTestId('version-label').textContent).toBe('1/2');
    expect((screen.getByRole('button', { name: 'Previous version of this answer' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.click(screen.getByRole('button', { name: 'Next version of this answer' }));
    await screen.findByText('Second answer');
  });

  it('branches on an edited question and keeps the earlier branch', async () => {
    await renderApp();
    backend.stream(await ask('Question one'), [{ content: 'Answer one' }]);
    await screen.findByText('Answer one');
    await fireEvent.click(screen.getByRole('button', { name: 'Edit and resend' }));
    const edit = screen.getByRole('textbox', { name: 'Edit message' });
    await fireEvent.input(edit, { target: { value: 'Question two' } });
    await fireEvent.keyDown(edit, { key: 'Enter' });
    await screen.findByText('Question two');
    backend.stream(lastReply(), [{ content: 'Answer two' }]);
    await screen.findByText('Answer two');
    const group = screen.getByRole('group', { name: 'Versions of this question' });
    expect(within(group).getByTestId('version-label').textContent).toBe('2/2');
    await fireEvent.click(within(group).getByRole('button', { name: 'Previous version of this question' }));
    await screen.findByText('Question one');
    await screen.findByText('Answer one');
    expect(screen.queryByText('Answer two')).toBeNull();
  });

  it('opens a search hit on a hidden branch on that branch', async () => {
    const c = backend.addConversation('Animals', ['Name an animal']);
    const q = backend.messages.at(-1)!;
    const zebra = backend.addMessage(c.id, 'assistant', 'A zebra, striped.', 'complete', q.id);
    backend.addMessage(c.id, 'assistant', 'A heron.', 'complete', q.id); // regenerated: shown
    await renderApp();
    const nav = screen.getByRole('navigation', { name: 'Conversations' });
    await fireEvent.input(within(nav).getByRole('searchbox', { name: 'Search conversations' }), { target: { value: 'zebra' } });
    await waitFor(() => expect(backend.ui.Conversations).toHaveBeenLastCalledWith('zebra'));
    await fireEvent.click(await within(nav).findByRole('button', { name: /^Animals/ }));
    await screen.findByText('A zebra, striped.');
    expect(screen.queryByText('A heron.')).toBeNull();
    expect(backend.ui.ShowVersion).toHaveBeenCalledWith(zebra.id);
  });

  it('shows when and by which model an answer was written, and how long it thought', async () => {
    await renderApp();
    backend.stream(await ask('Why?'), [{ reasoning: 'hmm' }, { content: 'Because.' }]);
    await screen.findByText('Because.');
    await waitFor(() => expect(screen.getAllByTestId('meta').length).toBe(2));
    const meta = screen.getAllByTestId('meta')[1].textContent!;
    expect(meta).toContain('Suzuran Tiny');
    expect(meta).toContain('thought for 3.2 s');
    expect(screen.getByText('Thought for 3.2 s')).toBeTruthy();
  });
});

describe('export and import', () => {
  it('downloads the open conversation in a browser and imports a file into a new one', async () => {
    const clicks: string[] = [];
    vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      clicks.push(this.download);
    });
    URL.createObjectURL = vi.fn(() => 'blob:x');
    URL.revokeObjectURL = vi.fn();
    await renderApp();
    backend.stream(await ask('Export me'), [{ content: 'Sure.' }]);
    await screen.findByText('Sure.');
    await fireEvent.click(screen.getByRole('button', { name: 'Export JSON' }));
    await waitFor(() => expect(clicks).toEqual([`chat-${lastReply().conversationId}.json`]));
    expect(backend.ui.SaveExport).toHaveBeenCalledWith(lastReply().conversationId, 'json');
    expect(await screen.findByText(/Downloaded chat-/)).toBeTruthy();

    const text = (await backend.ui.Export(lastReply().conversationId, 'json')).text;
    const input = screen.getByTestId('import-file') as HTMLInputElement;
    const file = new File([text], 'chat.json', { type: 'application/json' });
    await fireEvent.change(input, { target: { files: [file] } });
    await waitFor(() => expect(backend.ui.Import).toHaveBeenCalledWith(text));
    await waitFor(() => expect(backend.conversations[0].title).toBe('Imported'));
    await waitFor(() => expect(screen.getAllByText('Export me').length).toBeGreaterThan(0));

    const bad = new File(['{oops'], 'bad.json');
    await fireEvent.change(input, { target: { files: [bad] } });
    expect(await screen.findByText(/it is not valid JSON/)).toBeTruthy();
  });
});
