import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from './App.svelte';
import { FakeBackend } from './test/fakeBackend';
import { append } from './lib/chat.svelte';
import { EventType, MessageStatus, type ConversationView, type Message } from './lib/gen/service';

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

/** Types text and presses Enter; returns the reply the fake created. */
async function sendMessage(text: string): Promise<Message> {
  await fireEvent.input(messageBox(), { target: { value: text } });
  await fireEvent.keyDown(messageBox(), { key: 'Enter' });
  await waitFor(() => expect(backend.ui.Send).toHaveBeenCalled());
  await waitFor(() => expect(screen.getAllByTestId('message').length).toBeGreaterThanOrEqual(2));
  return backend.messages.filter((m) => m.role === 'assistant').at(-1)!;
}

describe('chat view', () => {
  it('keeps a reply that ended while a reload was on its way, rather than the older copy the reload read', async () => {
    await renderApp();
    const reply = await sendMessage('What does json.dumps do?');
    // The reload that a gap in the text asks for answers late, with the
    // reply as it was before it ended.
    let answer: (v: unknown) => void = () => {};
    const stale = { ...reply, content: 'It', status: MessageStatus.Streaming };
    const question = backend.messages.find((m) => m.role === 'user')!;
    backend.ui.Conversation = vi.fn(
      () =>
        new Promise<ConversationView>((resolve) => {
          answer = () => resolve({ conversation: backend.conversations[0], messages: [{ ...question }, stale] });
        }),
    );
    backend.emit({ type: EventType.Reply, conversationId: reply.conversationId, messageId: reply.id, content: ' returns', contentAt: 2 });
    await waitFor(() => expect(backend.ui.Conversation).toHaveBeenCalled());
    backend.stream(reply, [{ content: 'It returns a JSON string.' }]);
    await screen.findByTestId('stats');
    answer(undefined);
    await new Promise((r) => setTimeout(r, 20));
    const items = screen.getAllByTestId('message');
    expect(items[1].dataset.status).toBe('complete');
    expect(screen.getByTestId('stats').textContent).toContain('30 tokens');
    expect(screen.getByTestId('answer').textContent).toContain('It returns a JSON string.');
  });

  it('shows the version, the demo model banner and an empty conversation', async () => {
    await renderApp();
    expect(screen.getByTestId('version').textContent).toBe('1.2.3');
    expect(screen.getByTestId('demo-banner').textContent).toContain('Suzuran Tiny');
    expect(screen.getByRole('button', { name: 'Get Qwen3.6-35B-A3B' })).toBeTruthy();
    expect(screen.getByRole('main', { name: 'Conversation' }).textContent).toContain('Ask anything');
    expect((screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement).disabled).toBe(true);
  });

  it('offers the demo model questions it answers, and lets its notice be dismissed', async () => {
    localStorage.removeItem('suzuran.demoBannerDismissed');
    await renderApp();
    const suggestions = screen.getByRole('list', { name: 'Questions to try' });
    await fireEvent.click(within(suggestions).getByRole('button', { name: 'Explain itertools.chain.' }));
    await waitFor(() => expect(backend.ui.Send).toHaveBeenCalledWith(expect.objectContaining({ text: 'Explain itertools.chain.' })));
    await fireEvent.click(screen.getByRole('button', { name: 'Dismiss the demo notice' }));
    expect(screen.queryByTestId('demo-banner')).toBeNull();
    expect(localStorage.getItem('suzuran.demoBannerDismissed')).toBe('1');
    localStorage.removeItem('suzuran.demoBannerDismissed');
  });

  it('sends on Enter, keeps Shift+Enter for a new line, ignores blank messages', async () => {
    await renderApp();
    await fireEvent.input(messageBox(), { target: { value: '   ' } });
    await fireEvent.keyDown(messageBox(), { key: 'Enter' });
    await fireEvent.input(messageBox(), { target: { value: 'first line' } });
    await fireEvent.keyDown(messageBox(), { key: 'Enter', shiftKey: true });
    expect(backend.ui.Send).not.toHaveBeenCalled();

    await sendMessage('What does json.dumps do?');
    expect(backend.ui.Send).toHaveBeenCalledWith({ conversationId: 0, text: 'What does json.dumps do?', think: false });
    expect(messageBox().value).toBe('');
  });

  it('streams a reply: prefill, thinking live then collapsed, Markdown, stats', async () => {
    await renderApp();
    const reply = await sendMessage('What does json.dumps do?');
    backend.emit({ type: EventType.Prefill, conversationId: reply.conversationId, messageId: reply.id, promptTokens: 18012, promptDone: 7205 });
    await screen.findByText('Reading 18,012 tokens… 40 %');
    expect(screen.getByRole('button', { name: 'Stop' })).toBeTruthy();

    backend.stream(reply, [{ reasoning: 'The user asks about ' }, { reasoning: 'json.' }], MessageStatus.Streaming);
    const details = (await screen.findByTestId('thinking')).closest('details')!;
    await waitFor(() => expect(screen.getByTestId('thinking').textContent).toBe('The user asks about json.'));
    expect(details.open).toBe(true);
    expect(screen.queryByText(/Reading/)).toBeNull();

    backend.stream(reply, [{ content: 'It returns **a JSON string**.\n\n```python\njson.dumps(1)\n```' }]);
    await waitFor(() => expect(screen.getByTestId('answer').querySelector('strong')?.textContent).toBe('a JSON string'));
    await waitFor(() => expect(details.open).toBe(false));
    expect(screen.getByTestId('answer').querySelector('button.copy-code')).toBeTruthy();
    const stats = await screen.findByTestId('stats');
    expect(stats.textContent).toBe('41.3 tok/s · 30 tokens · first token 85 ms · 12 prompt tokens cached');
    expect(screen.getByRole('button', { name: 'Send' })).toBeTruthy();
    // The list is not a live region; the finished answer is announced once.
    expect(screen.getByRole('main', { name: 'Conversation' }).querySelector('ol[aria-live], ol [aria-live]:not(button *)')).toBeNull();
    expect(screen.getByTestId('announcement').textContent).toMatch(/^Answer: It returns \*\*a JSON string\*\*/);
    expect(screen.queryByTestId('thoughts-only')).toBeNull();
  });

  it('marks the reply interrupted when the server is lost, and reads the state again when it is back', async () => {
    await renderApp();
    const reply = await sendMessage('What does json.dumps do?');
    backend.stream(reply, [{ content: 'It ret' }], MessageStatus.Streaming);
    await screen.findByText('It ret');
    backend.emit({ type: 'connection', connected: false });
    expect((await screen.findByTestId('reconnecting')).textContent).toMatch(/Reconnecting/);
    await screen.findByText(/Interrupted/);
    expect(screen.queryByRole('button', { name: 'Stop' })).toBeNull();
    const calls = vi.mocked(backend.ui.State).mock.calls.length;
    backend.state.model = { ...backend.state.model, name: 'Back again' };
    backend.emit({ type: 'connection', connected: true });
    await waitFor(() => expect(screen.queryByTestId('reconnecting')).toBeNull());
    expect(vi.mocked(backend.ui.State).mock.calls.length).toBe(calls + 1);
    await waitFor(() => expect(screen.getByTestId('model-state').textContent).toMatch(/Back again/));
  });

  it('says so when an answer has thoughts but no text', async () => {
    await renderApp();
    const reply = await sendMessage('Think only');
    backend.stream(reply, [{ reasoning: 'Hmm, thinking.' }]);
    expect((await screen.findByTestId('thoughts-only')).textContent).toMatch(/thought but wrote no answer/);
    expect(screen.getByTestId('announcement').textContent).toBe('The answer ended without text.');
  });

  it('shows the chat title in the header only in the chat', async () => {
    await renderApp();
    await sendMessage('What does json.dumps do?');
    const header = document.querySelector('header .title')!;
    await waitFor(() => expect(header.textContent).toBe('What does json.dumps do?'));
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    expect(header.textContent).toBe('Settings');
  });

  it('copies the answer and the question, and says so', async () => {
    const writeText = vi.fn().mockResolvedValue(undefined);
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    try {
      await renderApp();
      const reply = await sendMessage('What does json.dumps do?');
      backend.stream(reply, [{ content: 'It serialises **obj**.' }]);
      await screen.findByText('obj');
      const copyAnswer = screen.getByRole('button', { name: 'Copy answer' });
      await fireEvent.click(copyAnswer);
      expect(writeText).toHaveBeenCalledWith('It serialises **obj**.');
      await waitFor(() => expect(copyAnswer.textContent?.trim()).toBe('Copied'));
      const copyQuestion = screen.getByRole('button', { name: 'Copy question' });
      await fireEvent.click(copyQuestion);
      expect(writeText).toHaveBeenLastCalledWith('What does json.dumps do?');
      await waitFor(() => expect(copyQuestion.textContent?.trim()).toBe('Copied'));
      writeText.mockRejectedValueOnce(new Error('denied'));
      await fireEvent.click(copyQuestion);
      await waitFor(() => expect(copyQuestion.textContent?.trim()).toBe('Copy failed'));
    } finally {
      Reflect.deleteProperty(navigator, 'clipboard');
    }
  });

  it('stops with the Stop button and with Esc', async () => {
    await renderApp();
    const reply = await sendMessage('Tell me a story');
    await fireEvent.click(screen.getByRole('button', { name: 'Stop' }));
    expect(backend.ui.Stop).toHaveBeenCalledWith(reply.conversationId);
    await fireEvent.keyDown(window, { key: 'Escape' });
    expect(backend.ui.Stop).toHaveBeenCalledTimes(2);

    backend.stream(reply, [{ content: 'Once upon' }], MessageStatus.Stopped);
    await screen.findByText('Stopped.');
    expect(screen.getByRole('button', { name: 'Continue' })).toBeTruthy();
  });

  it('regenerates the last answer and edits and resends a question', async () => {
    await renderApp();
    const reply = await sendMessage('What does json.dumps do?');
    backend.stream(reply, [{ content: 'First answer' }]);
    await screen.findByText('First answer');

    await fireEvent.click(screen.getByRole('button', { name: 'Regenerate' }));
    expect(backend.ui.Regenerate).toHaveBeenCalledWith(reply.conversationId, false);
    await waitFor(() => expect(screen.queryByText('First answer')).toBeNull());

    const second = backend.messages.filter((m) => m.role === 'assistant').at(-1)!;
    backend.stream(second, [{ content: 'Second answer' }]);
    await screen.findByText('Second answer');

    await fireEvent.click(screen.getByRole('button', { name: 'Edit and resend' }));
    const edit = screen.getByRole('textbox', { name: 'Edit message' }) as HTMLTextAreaElement;
    expect(edit.value).toBe('What does json.dumps do?');
    // Focus goes to the edit box, the caret after the text.
    await waitFor(() => expect(document.activeElement).toBe(edit));
    expect(edit.selectionStart).toBe(edit.value.length);
    await fireEvent.input(edit, { target: { value: 'What does json.loads do?' } });
    await fireEvent.keyDown(edit, { key: 'Enter' });
    const question = backend.messages.find((m) => m.role === 'user')!;
    expect(backend.ui.Edit).toHaveBeenCalledWith(question.id, 'What does json.loads do?', false);
    await screen.findByText('What does json.loads do?');
    await waitFor(() => expect(screen.queryByText('Second answer')).toBeNull());
  });

  it('sends with thinking when the switch is on, and remembers it', async () => {
    backend.state.model = { ...backend.state.model, demo: false, name: 'Qwen3.6-35B-A3B-4bit' };
    await renderApp();
    await fireEvent.click(screen.getByRole('checkbox', { name: 'Thinking' }));
    await waitFor(() => expect(backend.ui.SaveSettings).toHaveBeenCalledWith(expect.objectContaining({ thinking: true })));
    await sendMessage('Why?');
    expect(backend.ui.Send).toHaveBeenCalledWith({ conversationId: 0, text: 'Why?', think: true });
  });

  it('keeps thinking off for the demo model, which was trained without it', async () => {
    backend.settings.thinking = true;
    await renderApp();
    const box = screen.getByRole('checkbox', { name: 'Thinking' }) as HTMLInputElement;
    expect(box.disabled).toBe(true);
    expect(box.checked).toBe(false);
  });

  it('offers Continue and Regenerate on an interrupted answer', async () => {
    const c = backend.addConversation('Old', ['Question']);
    backend.addMessage(c.id, 'assistant', 'Half an ans', MessageStatus.Interrupted);
    await renderApp();
    await fireEvent.click(screen.getByRole('button', { name: /^Old/ }));
    await screen.findByText(/Interrupted/);
    await fireEvent.click(screen.getByRole('button', { name: 'Continue' }));
    expect(backend.ui.Continue).toHaveBeenCalled();
    expect(screen.getByRole('button', { name: 'Regenerate' })).toBeTruthy();
  });

  it('shows the service’s errors', async () => {
    backend.ui.Send = async () => {
      throw new Error('the model is busy with other requests; try again in a moment');
    };
    await renderApp();
    await fireEvent.input(messageBox(), { target: { value: 'hi' } });
    await fireEvent.keyDown(messageBox(), { key: 'Enter' });
    expect((await screen.findByRole('alert')).textContent).toContain('the model is busy');
    await waitFor(() => expect(messageBox().value).toBe('hi')); // nothing typed is lost
  });

  it('lists the keyboard shortcuts on Ctrl+/ and closes the list on Esc', async () => {
    await renderApp();
    await fireEvent.keyDown(window, { key: '/', ctrlKey: true });
    const dialog = screen.getByRole('dialog', { name: 'Keyboard shortcuts' });
    expect(within(dialog).getByText('New chat')).toBeTruthy();
    expect(document.activeElement).toBe(within(dialog).getByRole('button', { name: 'Close' }));
    await fireEvent.keyDown(dialog, { key: 'Escape' });
    expect(screen.queryByRole('dialog', { name: 'Keyboard shortcuts' })).toBeNull();
  });

  it("opens the conversation's own settings with Ctrl+I", async () => {
    await renderApp();
    await fireEvent.keyDown(window, { key: 'i', ctrlKey: true });
    expect(screen.queryByTestId('chat-settings')).toBeNull(); // no conversation yet
    const reply = await sendMessage('Hello');
    backend.stream(reply, [{ content: 'Hi' }]);
    await screen.findByText('Hi');
    await fireEvent.keyDown(window, { key: 'i', ctrlKey: true });
    expect(await screen.findByTestId('chat-settings')).toBeTruthy();
  });

  it('starts a new chat with Ctrl+N', async () => {
    await renderApp();
    const reply = await sendMessage('Hello');
    backend.stream(reply, [{ content: 'Hi' }]);
    await screen.findByText('Hi');
    await fireEvent.keyDown(window, { key: 'n', ctrlKey: true });
    await screen.findByText(/Ask anything/);
  });
});

describe('links', () => {
  it('open in the browser through Wails in the desktop window', async () => {
    const opened: string[] = [];
    window.runtime = { EventsOn: () => () => {}, BrowserOpenURL: (url: string) => opened.push(url) };
    try {
      await renderApp();
      const reply = await sendMessage('Where are the docs?');
      backend.stream(reply, [{ content: 'See [the docs](https://docs.python.org/3/).' }]);
      await fireEvent.click(await screen.findByRole('link', { name: 'the docs' }));
      expect(opened).toEqual(['https://docs.python.org/3/']);
    } finally {
      delete window.runtime;
    }
  });
});

describe('tray commands', () => {
  it('opens a new chat and the settings', async () => {
    await renderApp();
    const reply = await sendMessage('Hello');
    backend.stream(reply, [{ content: 'Hi there' }]);
    await screen.findByText('Hi there');
    backend.emit({ type: 'command', command: 'new-chat' });
    await screen.findByText(/Ask anything/);
    backend.emit({ type: 'command', command: 'settings' });
    await screen.findByRole('region', { name: 'Settings' });
  });
});

describe('sidebar', () => {
  it('lists, searches, renames, deletes and undoes', async () => {
    backend.addConversation('Pairs', ['What does itertools.pairwise do?']);
    backend.addConversation('Serialising', ['What does json.dumps do?']);
    await renderApp();
    const nav = screen.getByRole('navigation', { name: 'Conversations' });
    await waitFor(() => expect(within(nav).getAllByRole('button', { name: /^(Pairs|Serialising)$/ })).toHaveLength(2));

    await fireEvent.input(within(nav).getByRole('searchbox', { name: 'Search conversations' }), {
      target: { value: 'pairwise' },
    });
    await waitFor(() => expect(backend.ui.Conversations).toHaveBeenLastCalledWith('pairwise'));
    await waitFor(() => expect(within(nav).queryByText('Serialising')).toBeNull());
    expect(within(nav).getByText('Pairs')).toBeTruthy();

    await fireEvent.click(within(nav).getByRole('button', { name: 'Rename Pairs' }));
    const input = within(nav).getByRole('textbox', { name: 'New title' });
    await fireEvent.input(input, { target: { value: 'Itertools' } });
    await fireEvent.keyDown(input, { key: 'Enter' });
    await waitFor(() => expect(backend.ui.Rename).toHaveBeenCalledWith(2 - 1, 'Itertools'));
    await within(nav).findByText('Itertools');

    await fireEvent.click(within(nav).getByRole('button', { name: 'Delete Itertools' }));
    await waitFor(() => expect(within(nav).queryByText('Itertools')).toBeNull());
    await fireEvent.click(within(nav).getByRole('button', { name: 'Undo' }));
    expect(backend.ui.Undelete).toHaveBeenCalledWith(1);
    await within(nav).findByText('Itertools');
  });

  it('is one Tab stop, walked with the arrow keys; F2 renames, Delete deletes', async () => {
    backend.addConversation('First', ['one?']);
    backend.addConversation('Second', ['two?']);
    backend.addConversation('Third', ['three?']);
    await renderApp();
    const nav = screen.getByRole('navigation', { name: 'Conversations' });
    await within(nav).findByText('Third');
    const items = () => [...nav.querySelectorAll<HTMLButtonElement>('button.open')];
    // One item takes the Tab stop; rename and delete take none.
    expect(items().map((b) => b.tabIndex)).toEqual([0, -1, -1]);
    expect(within(nav).getByRole('button', { name: 'Rename Third' }).tabIndex).toBe(-1);
    expect(within(nav).getByRole('button', { name: 'Delete Third' }).tabIndex).toBe(-1);
    items()[0].focus();
    await fireEvent.keyDown(items()[0], { key: 'ArrowDown' });
    await waitFor(() => expect(document.activeElement?.textContent).toContain('Second'));
    expect(items().map((b) => b.tabIndex)).toEqual([-1, 0, -1]);
    await fireEvent.keyDown(document.activeElement!, { key: 'End' });
    await waitFor(() => expect(document.activeElement?.textContent).toContain('First'));
    await fireEvent.keyDown(document.activeElement!, { key: 'Home' });
    await waitFor(() => expect(document.activeElement?.textContent).toContain('Third'));
    await fireEvent.keyDown(document.activeElement!, { key: 'F2' });
    const input = within(nav).getByRole('textbox', { name: 'New title' });
    await fireEvent.input(input, { target: { value: 'Renamed' } });
    await fireEvent.keyDown(input, { key: 'Enter' });
    await within(nav).findByText('Renamed');
    const renamed = items().find((b) => b.textContent?.includes('Renamed'))!;
    renamed.focus();
    await fireEvent.keyDown(renamed, { key: 'Delete' });
    await waitFor(() => expect(within(nav).queryByText('Renamed')).toBeNull());
    expect(screen.getByRole('status').textContent).toContain('Deleted “Renamed”');
    await waitFor(() => expect(document.activeElement?.textContent).toContain('Second'));
  });

  it('groups conversations by date', async () => {
    backend.addConversation('Old one', ['json?']);
    backend.conversations[0].updatedAt = Date.now() - 400 * 24 * 3600 * 1000;
    backend.addConversation('New one', ['zipfile?']);
    await renderApp();
    const nav = screen.getByRole('navigation', { name: 'Conversations' });
    await within(nav).findByText('Today');
    const labels = [...nav.querySelectorAll('li.group')].map((g) => g.textContent);
    expect(labels[0]).toBe('Today');
    expect(labels).toHaveLength(2);
  });

  it('says when nothing matches', async () => {
    await renderApp();
    expect(screen.getByText('No conversations yet')).toBeTruthy();
  });
});

describe('settings', () => {
  async function openSettings() {
    await renderApp();
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    return screen.getByRole('region', { name: 'Settings' });
  }

  it('saves the system prompt, a custom preset and the API exposure, showing the new key', async () => {
    const view = await openSettings();
    await fireEvent.input(within(view).getByRole('textbox', { name: 'System prompt' }), {
      target: { value: 'Answer briefly.' },
    });
    await fireEvent.change(within(view).getByRole('combobox', { name: 'Preset' }), { target: { value: 'custom' } });
    await fireEvent.input(within(view).getByRole('spinbutton', { name: 'Temperature' }), { target: { value: '0.3' } });
    await fireEvent.click(within(view).getByRole('checkbox', { name: /Reachable from other computers/ }));
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(backend.ui.SaveSettings).toHaveBeenCalledWith(
      expect.objectContaining({
        system_prompt: 'Answer briefly.',
        sampling_preset: 'custom',
        sampling: expect.objectContaining({ temperature: 0.3 }),
        api_lan: true,
      }),
    );
    expect((within(view).getByRole('textbox', { name: 'API key' }) as HTMLInputElement).value).toBe('sk-suzuran-test');
  });

  it('shows why settings were refused', async () => {
    const view = await openSettings();
    await fireEvent.input(within(view).getByRole('textbox', { name: /Allowed web origins/ }), {
      target: { value: 'localhost:3000' },
    });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    expect((await screen.findByRole('alert')).textContent).toContain('CORS origin "localhost:3000"');
    expect(within(view).queryByText('Saved.')).toBeNull();
  });

  it('records the global shortcut from a key press and saves it', async () => {
    backend.state.shortcut = { available: true, error: '' };
    const view = await openSettings();
    const field = within(view).getByRole('textbox', { name: /Shortcut to open the chat window/ }) as HTMLInputElement;
    expect(field.value).toBe('Option+Space');
    await fireEvent.keyDown(field, { code: 'KeyK', key: 'k', metaKey: true, shiftKey: true });
    expect(field.value).toBe('Shift+Cmd+K');
    // A letter alone is typing, not a shortcut.
    await fireEvent.keyDown(field, { code: 'KeyJ', key: 'j' });
    expect(field.value).toBe('Shift+Cmd+K');
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(backend.ui.SaveSettings).toHaveBeenCalledWith(expect.objectContaining({ global_shortcut: 'Shift+Cmd+K' }));
    expect(backend.settings.global_shortcut).toBe('Shift+Cmd+K');
  });

  it('says why macOS refused a shortcut, when saving and at start', async () => {
    backend.state.shortcut = { available: true, error: '' };
    backend.refusedShortcuts.add('Cmd+Space');
    await renderApp();
    // The desktop takes the shortcut after the window opened: the settings
    // view reads its state again.
    backend.state.shortcut = { available: true, error: 'Option+Space (⌥Space) is taken by another app or by macOS: choose another shortcut in Settings' };
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    const view = screen.getByRole('region', { name: 'Settings' });
    expect((await within(view).findByRole('alert')).textContent).toContain('⌥Space) is taken by another app');
    const field = within(view).getByRole('textbox', { name: /Shortcut to open the chat window/ });
    await fireEvent.keyDown(field, { code: 'Space', key: ' ', metaKey: true });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await waitFor(() =>
      expect(screen.getAllByRole('alert').some((a) => a.textContent?.includes('Cmd+Space is taken by another app'))).toBe(true),
    );
    expect(within(view).queryByText('Saved.')).toBeNull();
    expect(backend.settings.global_shortcut).toBe('Option+Space');
  });

  it('says the global shortcut belongs to the macOS app where there is none', async () => {
    const view = await openSettings();
    expect(within(view).queryByRole('textbox', { name: /Shortcut to open the chat window/ })).toBeNull();
    expect(within(view).getByTestId('global-shortcut-unavailable').textContent).toContain('macOS app');
  });

  it('says the API is suzuran serve\'s when the window is served by it', async () => {
    backend.state.api = { available: false, enabled: true, url: 'http://127.0.0.1:11435', lan: false, error: '' };
    const view = await openSettings();
    expect(within(view).queryByRole('checkbox', { name: /Local API on/ })).toBeNull();
    expect(within(view).getByTestId('served-api').textContent).toContain('http://127.0.0.1:11435');
  });

  it('switches the local API and shows its address', async () => {
    const view = await openSettings();
    await fireEvent.click(within(view).getByRole('checkbox', { name: /Local API on/ }));
    expect(backend.ui.SetAPIEnabled).toHaveBeenCalledWith(true);
    expect((await within(view).findByTestId('api-url')).textContent).toBe('http://127.0.0.1:8080');
  });
});

describe('append', () => {
  const message = (content: string): Message => ({
    id: 1,
    conversationId: 1,
    role: 'assistant',
    content,
    reasoning: '',
    status: 'streaming',
    createdAt: 0,
  });
  const cases: { name: string; have: string; text: string; at: number; want: string; ok: boolean }[] = [
    { name: 'next batch', have: 'Hello', text: ' world', at: 5, want: 'Hello world', ok: true },
    { name: 'already loaded', have: 'Hello world', text: ' world', at: 5, want: 'Hello world', ok: true },
    { name: 'partly loaded', have: 'Hello wo', text: ' world', at: 5, want: 'Hello world', ok: true },
    { name: 'gap', have: 'Hel', text: ' world', at: 5, want: 'Hel', ok: false },
    { name: 'astral characters count as two', have: '🙂', text: '!', at: 2, want: '🙂!', ok: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const m = message(c.have);
      expect(append(m, 'content', c.text, c.at)).toBe(c.ok);
      expect(m.content).toBe(c.want);
    });
  }
});
