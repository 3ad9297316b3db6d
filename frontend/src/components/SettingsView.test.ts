import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';
import { contextLength, fieldOf, serveCommand } from '../lib/settingsForm';
import { defaultSettings } from '../test/fakeBackend';

let backend: FakeBackend;

beforeEach(() => {
  backend = new FakeBackend();
});
afterEach(() => cleanup());

async function openSettings() {
  render(App, { backend });
  await screen.findByTestId('version');
  await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
  return screen.getByRole('region', { name: 'Settings' });
}

describe('settings under suzuran serve', () => {
  it('saves the API settings without an error, shows the saved values and says what a restart of serve takes', async () => {
    backend.state.api = { available: false, enabled: true, url: 'http://127.0.0.1:11435', lan: false, error: '' };
    const view = await openSettings();
    await fireEvent.input(within(view).getByRole('spinbutton', { name: 'Port' }), { target: { value: '9999' } });
    await fireEvent.click(within(view).getByRole('checkbox', { name: /Reachable from other computers/ }));
    await fireEvent.input(within(view).getByRole('textbox', { name: /Allowed web origins/ }), {
      target: { value: ' http://localhost:3000/ \n\n' },
    });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(screen.queryByRole('alert')).toBeNull();
    // The form shows what was saved: the new key, the origins as stored.
    expect((within(view).getByRole('textbox', { name: 'API key' }) as HTMLInputElement).value).toBe('sk-suzuran-test');
    expect((within(view).getByRole('textbox', { name: /Allowed web origins/ }) as HTMLTextAreaElement).value).toBe(
      'http://localhost:3000',
    );
    const note = within(view).getByTestId('serve-restart').textContent!.replace(/\s+/g, ' ');
    expect(note).toContain('until it is restarted');
    expect(note).toContain('suzuran serve --addr 0.0.0.0:9999 --api-key sk-suzuran-test --cors http://localhost:3000');
  });

  it('says nothing of a restart when the API settings did not change', async () => {
    backend.state.api = { available: false, enabled: true, url: 'http://127.0.0.1:11435', lan: false, error: '' };
    const view = await openSettings();
    await fireEvent.input(within(view).getByRole('textbox', { name: 'System prompt' }), { target: { value: 'Be brief.' } });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(within(view).queryByTestId('serve-restart')).toBeNull();
  });
});

describe('settings form', () => {
  it('takes any context length, rounding inside and saying so beside the field', async () => {
    const view = await openSettings();
    const field = within(view).getByRole('spinbutton', { name: /Context length/ }) as HTMLInputElement;
    expect(field.step).toBe('any');
    await fireEvent.input(field, { target: { value: '8000' } });
    expect(within(view).queryByTestId('context-note')).toBeNull();
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(backend.settings.context_tokens).toBe(8000);

    await fireEvent.input(field, { target: { value: '100' } });
    expect(within(view).getByTestId('context-note').textContent).toBe('Rounded up to 512 tokens, the least a conversation needs.');
    expect(field.getAttribute('aria-describedby')).toBe('context-note');
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(backend.settings.context_tokens).toBe(512));
    expect(field.value).toBe('512');
  });

  it('shows a refusal beside the field it concerns, not as a toast', async () => {
    const view = await openSettings();
    const origins = within(view).getByRole('textbox', { name: /Allowed web origins/ });
    await fireEvent.input(origins, { target: { value: 'localhost:3000' } });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    const error = await within(view).findByTestId('error-origins');
    expect(error.textContent).toContain('CORS origin "localhost:3000"');
    expect(origins.getAttribute('aria-invalid')).toBe('true');
    expect(origins.getAttribute('aria-describedby')).toBe('error-origins');
    expect(screen.getAllByRole('alert')).toEqual([error]);
    expect(within(view).queryByText('Saved.')).toBeNull();
    // Fixed, the message goes.
    await fireEvent.input(origins, { target: { value: 'http://localhost:3000' } });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(within(view).queryByTestId('error-origins')).toBeNull();
  });

  it('says beside the Local API switch why the API did not start, not as a toast', async () => {
    vi.mocked(backend.ui.SetAPIEnabled).mockRejectedValueOnce(new Error('port 8080: address already in use (choose another port in Settings)'));
    const view = await openSettings();
    const toggle = within(view).getByRole('checkbox', { name: /Local API on/ });
    await fireEvent.click(toggle);
    const error = await within(view).findByTestId('error-api');
    expect(error.textContent).toContain('address already in use');
    expect(toggle.getAttribute('aria-describedby')).toBe('error-api');
    expect(screen.getAllByRole('alert')).toEqual([error]);
    expect((toggle as HTMLInputElement).checked).toBe(false);
  });

  it('titles its boxes with headings, the page heading first, and uses only the app\'s button styles', async () => {
    const view = await openSettings();
    await waitFor(() => expect(within(view).getAllByRole('radio').length).toBe(1));
    expect(view.firstElementChild?.tagName).toBe('H2');
    expect(view.querySelector('fieldset, legend')).toBeNull();
    for (const name of ['Model', 'Sampling', 'Local API']) {
      expect(within(view).getByRole('group', { name }).querySelector('h3')?.textContent).toBe(name);
    }
    for (const b of within(view).getAllByRole('button')) {
      expect(['primary', 'secondary', 'plain'].filter((c) => b.classList.contains(c)).length, b.textContent!).toBe(1);
    }
    // The demo is named once as such.
    expect(within(view).getByTestId('model-choices').textContent).not.toMatch(/\(demo\)\s*demo/i);
  });
});

describe('leaving settings with unsaved changes', () => {
  it('asks before a tray command or Ctrl+N leaves', async () => {
    const view = await openSettings();
    await fireEvent.input(within(view).getByRole('textbox', { name: 'System prompt' }), { target: { value: 'Answer briefly.' } });
    backend.emit({ type: 'command', command: 'new-chat' });
    let ask = await within(view).findByRole('alertdialog', { name: 'Unsaved changes' });
    await fireEvent.click(within(ask).getByRole('button', { name: 'Keep editing' }));
    expect(screen.getByRole('region', { name: 'Settings' })).toBe(view);
    // Settings again from the tray, while in Settings, is no leaving.
    backend.emit({ type: 'command', command: 'settings' });
    expect(within(view).queryByRole('alertdialog')).toBeNull();
    await fireEvent.keyDown(window, { key: 'n', ctrlKey: true });
    ask = await within(view).findByRole('alertdialog', { name: 'Unsaved changes' });
    await fireEvent.click(within(ask).getByRole('button', { name: 'Discard changes' }));
    await screen.findByText(/Ask anything/);
    expect(backend.settings.system_prompt).toBe('');
  });

  it('asks in the page, and keeps editing, discards or saves', async () => {
    const view = await openSettings();
    const prompt = within(view).getByRole('textbox', { name: 'System prompt' });
    await fireEvent.input(prompt, { target: { value: 'Answer briefly.' } });
    expect(within(view).getByTestId('unsaved')).toBeTruthy();

    // The sidebar's New chat waits for an answer.
    await fireEvent.click(screen.getByRole('button', { name: /New chat/ }));
    let ask = within(view).getByRole('alertdialog', { name: 'Unsaved changes' });
    await waitFor(() => expect(document.activeElement).toBe(within(ask).getByRole('button', { name: 'Save and leave' })));
    await fireEvent.keyDown(ask, { key: 'Escape' });
    expect(within(view).queryByRole('alertdialog')).toBeNull();
    await fireEvent.click(screen.getByRole('button', { name: /New chat/ }));
    ask = within(view).getByRole('alertdialog', { name: 'Unsaved changes' });
    await fireEvent.click(within(ask).getByRole('button', { name: 'Keep editing' }));
    expect(screen.getByRole('region', { name: 'Settings' })).toBe(view);
    expect((prompt as HTMLTextAreaElement).value).toBe('Answer briefly.');

    // Back to chat asks too; Discard leaves without saving.
    await fireEvent.click(within(view).getByRole('button', { name: 'Back to chat' }));
    ask = within(view).getByRole('alertdialog', { name: 'Unsaved changes' });
    await fireEvent.click(within(ask).getByRole('button', { name: 'Discard changes' }));
    await waitFor(() => expect(screen.queryByRole('region', { name: 'Settings' })).toBeNull());
    expect(backend.ui.SaveSettings).not.toHaveBeenCalled();

    // Save and leave saves, then leaves by the control that was clicked.
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    const again = screen.getByRole('region', { name: 'Settings' });
    await fireEvent.input(within(again).getByRole('textbox', { name: 'System prompt' }), { target: { value: 'Be kind.' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    await fireEvent.click(within(again).getByRole('button', { name: 'Save and leave' }));
    await waitFor(() => expect(screen.queryByRole('region', { name: 'Settings' })).toBeNull());
    expect(backend.settings.system_prompt).toBe('Be kind.');
  });

  it('asks before the model box\'s Download leaves too', async () => {
    const view = await openSettings();
    await fireEvent.input(within(view).getByRole('textbox', { name: 'System prompt' }), { target: { value: 'x' } });
    await fireEvent.click(within(view).getByRole('button', { name: /^Download Qwen/ }));
    const ask = within(view).getByRole('alertdialog', { name: 'Unsaved changes' });
    await fireEvent.click(within(ask).getByRole('button', { name: 'Discard changes' }));
    await screen.findByRole('region', { name: 'Get the model' });
  });

  it('leaves at once when nothing changed', async () => {
    const view = await openSettings();
    await fireEvent.click(within(view).getByRole('button', { name: 'Back to chat' }));
    expect(screen.queryByRole('region', { name: 'Settings' })).toBeNull();
  });
});

describe('removing a model', () => {
  it('asks with the space it frees, switches away from it and removes it', async () => {
    backend.models[0].current = false;
    backend.models.push({
      name: 'mlx-community/Qwen3.6-35B-A3B-4bit', dir: '/hub/snap', source: 'Hugging Face cache', size: 20_400_000_000,
      demo: false, current: true, valid: true, problem: '', removable: true, frees: 20_400_000_000,
    });
    const view = await openSettings();
    const list = await within(view).findByTestId('model-choices');
    await waitFor(() => expect(within(list).getAllByRole('radio').length).toBe(2));
    // The demo has no Remove.
    expect(within(list).getAllByRole('button', { name: /^Remove/ }).length).toBe(1);
    await fireEvent.click(within(list).getByRole('button', { name: 'Remove mlx-community/Qwen3.6-35B-A3B-4bit' }));
    const ask = within(list).getByRole('alertdialog');
    expect(document.activeElement).toBe(within(ask).getByRole('button', { name: 'Cancel' }));
    expect(ask.textContent).toContain('This frees 20.4 GB.');
    expect(ask.textContent).toContain('switches to the demo model first');
    // Esc or Cancel keeps it.
    await fireEvent.keyDown(ask, { key: 'Escape' });
    expect(within(list).queryByRole('alertdialog')).toBeNull();
    await fireEvent.click(within(list).getByRole('button', { name: 'Remove mlx-community/Qwen3.6-35B-A3B-4bit' }));
    await fireEvent.click(within(list).getByRole('button', { name: 'Cancel' }));
    expect(backend.ui.RemoveModel).not.toHaveBeenCalled();
    await fireEvent.click(within(list).getByRole('button', { name: 'Remove mlx-community/Qwen3.6-35B-A3B-4bit' }));
    await fireEvent.click(within(list).getByRole('button', { name: 'Remove and free 20.4 GB' }));
    expect((await within(view).findByTestId('model-removed')).textContent).toBe(
      'Removed mlx-community/Qwen3.6-35B-A3B-4bit: 20.4 GB freed.',
    );
    expect(backend.ui.RemoveModel).toHaveBeenCalledWith('/hub/snap');
    await waitFor(() => expect(within(list).getAllByRole('radio').length).toBe(1));
    expect((within(list).getByRole('radio') as HTMLInputElement).checked).toBe(true);
  });

  it('shows why a removal was refused beside the list', async () => {
    backend.models.push({
      name: 'gone', dir: '/lm/gone', source: 'LM Studio', size: 10, demo: false, current: false, valid: true, problem: '',
      removable: true, frees: 10,
    });
    const view = await openSettings();
    const list = await within(view).findByTestId('model-choices');
    await waitFor(() => expect(within(list).getAllByRole('radio').length).toBe(2));
    backend.models = backend.models.filter((m) => m.dir !== '/lm/gone');
    await fireEvent.click(within(list).getByRole('button', { name: 'Remove gone' }));
    await fireEvent.click(within(list).getByRole('button', { name: /Remove and free/ }));
    expect((await within(view).findByTestId('model-problem')).textContent).toContain('nothing was removed');
  });
});

describe('settingsForm', () => {
  it('rounds context lengths', () => {
    expect(contextLength(8000)).toEqual({ tokens: 8000, note: '' });
    expect(contextLength(0)).toEqual({ tokens: 0, note: '' });
    expect(contextLength('')).toEqual({ tokens: 0, note: '' });
    expect(contextLength(8000.4).tokens).toBe(8000);
    expect(contextLength(8000.4).note).toBe('Rounded to 8,000 tokens.');
    expect(contextLength(10).tokens).toBe(512);
    expect(contextLength(1e9)).toEqual({ tokens: 262144, note: 'Rounded down to 262,144 tokens, the most the model takes.' });
    expect(contextLength(-3).tokens).toBe(0);
  });

  it('finds the field an error names', () => {
    expect(fieldOf('temperature 3: use 0 (greedy) to 2')).toBe('temperature');
    expect(fieldOf('API port 0: use 1 to 65535')).toBe('port');
    expect(fieldOf('Cmd+Space is taken by another app or by macOS: choose another shortcut in Settings')).toBe('shortcut');
    expect(fieldOf('writing settings: disk full')).toBe('form');
  });

  it('writes the serve command line of saved API settings', () => {
    expect(serveCommand({ ...defaultSettings(), api_port: 11435 })).toBe('suzuran serve --addr 127.0.0.1:11435');
  });
});

describe('documents read before', () => {
  it('shows the space the prefix snapshots take, clears them and saves their limit', async () => {
    const view = await openSettings();
    const box = within(view).getByTestId('prefix-cache');
    await waitFor(() => expect(within(box).getByTestId('prefix-cache-used').textContent).toBe('300 MB'));
    await fireEvent.click(within(box).getByRole('button', { name: 'Clear' }));
    expect(backend.ui.ClearPrefixCache).toHaveBeenCalledOnce();
    await waitFor(() => expect(within(box).getByTestId('prefix-cache-used').textContent).toBe('0 MB'));
    expect((within(box).getByRole('button', { name: 'Clear' }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.input(within(box).getByRole('spinbutton', { name: /Disk space for them/ }), { target: { value: '20' } });
    await fireEvent.click(within(view).getByRole('button', { name: 'Save' }));
    await within(view).findByText('Saved.');
    expect(backend.settings.prefix_cache_gb).toBe(20);
  });
});
