import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';
import { thinkOf } from '../lib/chat.svelte';

let backend: FakeBackend;

beforeEach(() => {
  backend = new FakeBackend();
  backend.settings.thinking = true;
  backend.state.model.demo = false; // the demo model never thinks
});
afterEach(() => cleanup());

const none = { systemPrompt: '', thinking: '', samplingPreset: '' };
const conv = (thinking: string) => ({ id: 1, title: 't', createdAt: 0, updatedAt: 0, settings: { ...none, thinking } });

async function openConversation(title: string) {
  render(App, { backend });
  await screen.findByTestId('version');
  await fireEvent.click(await screen.findByText(title));
  await screen.findByTestId('chat-settings-button');
}

function thinkingSwitch(): HTMLInputElement {
  return screen.getByRole('checkbox', { name: 'Thinking' }) as HTMLInputElement;
}

describe('per-conversation settings', () => {
  it('puts a conversation’s own thinking over the app’s', () => {
    expect(thinkOf(conv(''), true)).toBe(true);
    expect(thinkOf(conv(''), false)).toBe(false);
    expect(thinkOf(conv('off'), true)).toBe(false);
    expect(thinkOf(conv('on'), false)).toBe(true);
  });

  it('edits them in the sheet, and the turns and the switch follow', async () => {
    const c = backend.addConversation('Paths', ['What does os.path.join do?']);
    backend.settings.system_prompt = 'Be brief.';
    await openConversation('Paths');
    expect(thinkingSwitch().checked).toBe(true);
    await fireEvent.click(screen.getByTestId('chat-settings-button'));
    const sheet = await screen.findByRole('dialog', { name: 'This conversation’s settings' });
    const prompt = within(sheet).getByLabelText('System prompt') as HTMLTextAreaElement;
    // The app's prompt shows as what an empty field means; the focus is in the sheet.
    expect(prompt.placeholder).toBe('As in Settings: Be brief.');
    expect(document.activeElement).toBe(prompt);
    await fireEvent.input(prompt, { target: { value: '  Answer in French.  ' } });
    await fireEvent.change(within(sheet).getByLabelText('Thinking'), { target: { value: 'off' } });
    await fireEvent.change(within(sheet).getByLabelText('Sampling'), { target: { value: 'coding' } });
    await fireEvent.click(within(sheet).getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(screen.queryByTestId('chat-settings')).toBeNull());
    expect(backend.ui.SetConversationSettings).toHaveBeenLastCalledWith(c.id, {
      systemPrompt: 'Answer in French.',
      thinking: 'off',
      samplingPreset: 'coding',
    });
    // The switch shows the conversation's thinking; the next question is sent with it.
    expect(thinkingSwitch().checked).toBe(false);
    const box = screen.getByRole('textbox', { name: 'Message' });
    await fireEvent.input(box, { target: { value: 'and os.path.split?' } });
    await fireEvent.keyDown(box, { key: 'Enter' });
    await waitFor(() => expect(backend.ui.Send).toHaveBeenCalled());
    expect(backend.ui.Send).toHaveBeenLastCalledWith(expect.objectContaining({ conversationId: c.id, think: false }));

    // A new chat takes the app's default again; going back, the conversation's own.
    await fireEvent.keyDown(window, { key: 'n', ctrlKey: true });
    expect(thinkingSwitch().checked).toBe(true);
    await fireEvent.click(screen.getByText('Paths'));
    await waitFor(() => expect(thinkingSwitch().checked).toBe(false));
  });

  it('keeps the switch’s position with the open conversation', async () => {
    const c = backend.addConversation('Paths', ['q']);
    await openConversation('Paths');
    await fireEvent.click(thinkingSwitch());
    await waitFor(() => expect(backend.conversations.find((x) => x.id === c.id)!.settings.thinking).toBe('off'));
  });

  it('closes on Esc without saving, and shows a refusal inside the sheet', async () => {
    backend.addConversation('Paths', ['q']);
    await openConversation('Paths');
    const button = screen.getByTestId('chat-settings-button');
    await fireEvent.click(button);
    let sheet = await screen.findByTestId('chat-settings');
    await fireEvent.input(within(sheet).getByLabelText('System prompt'), { target: { value: 'x' } });
    await fireEvent.keyDown(sheet, { key: 'Escape' });
    expect(screen.queryByTestId('chat-settings')).toBeNull();
    expect(backend.ui.SetConversationSettings).not.toHaveBeenCalled();
    expect(document.activeElement).toBe(button);

    vi.mocked(backend.ui.SetConversationSettings).mockRejectedValueOnce(new Error('the system prompt is 70 KB: keep it under 64 KB'));
    await fireEvent.click(button);
    sheet = await screen.findByTestId('chat-settings');
    await fireEvent.click(within(sheet).getByRole('button', { name: 'Save' }));
    expect((await within(sheet).findByRole('alert')).textContent).toContain('keep it under 64 KB');
    expect(screen.getByTestId('chat-settings')).toBeTruthy();
  });
});
