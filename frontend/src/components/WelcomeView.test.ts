import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';
import { EventType } from '../lib/gen/service';
import { errorAdvice } from '../lib/welcome';

let backend: FakeBackend;

beforeEach(() => {
  backend = new FakeBackend();
});
afterEach(() => cleanup());

/** Opens the app and the welcome view from the demo banner. */
async function openWelcome() {
  render(App, { backend });
  await screen.findByTestId('version');
  await fireEvent.click(screen.getByRole('button', { name: 'Get Qwen3.6-35B-A3B' }));
  return screen.findByRole('region', { name: 'Get the model' });
}

describe('welcome view', () => {
  it('explains the download: size, free space, where it goes, that it stays here, and the machine check', async () => {
    const view = await openWelcome();
    const plan = await within(view).findByTestId('welcome-plan');
    expect(plan.textContent).toContain('mlx-community/Qwen3.6-35B-A3B-4bit');
    expect(plan.textContent).toContain('20.4 GB');
    expect(plan.textContent).toContain('120 GB free');
    expect(within(view).getByTestId('welcome-dir').textContent).toBe(backend.welcome.dir);
    expect(view.textContent).toContain('stays on this computer');
    const findings = within(within(view).getByTestId('machine-check')).getAllByRole('listitem');
    expect(findings.map((f) => f.dataset.level)).toEqual(['ok', 'warning', 'ok']);
    expect(findings[1].textContent).toContain('24 GB of memory');
    expect((within(view).getByRole('button', { name: 'Download 20.4 GB' }) as HTMLButtonElement).disabled).toBe(false);
  });

  it('offers no download on a machine the check refuses', async () => {
    backend.welcome.canRun = false;
    backend.welcome.findings = [{ check: 'processor', level: 'refused', message: 'This Mac has an Intel processor.' }];
    const view = await openWelcome();
    await within(view).findByText(/Intel processor/);
    expect((within(view).getByRole('button', { name: 'Download 20.4 GB' }) as HTMLButtonElement).disabled).toBe(true);
    expect(view.textContent).toContain('cannot run the model');
  });

  it('downloads with progress, pauses and resumes, then says the model is in use', async () => {
    const view = await openWelcome();
    await fireEvent.click(await within(view).findByRole('button', { name: 'Download 20.4 GB' }));
    expect(backend.ui.StartDownload).toHaveBeenCalledWith('mlx-community/Qwen3.6-35B-A3B-4bit');
    backend.setDownload({
      ...backend.download, done: 9_180_000_000, total: 20_400_000_000, fraction: 0.45,
      bytesPerSecond: 25_000_000, secondsLeft: 449, line: 'Downloading …: 45% (9.18 GB of 20.4 GB), 7 min left',
    });
    const status = await within(view).findByTestId('download-status');
    await waitFor(() => expect(status.textContent).toContain('45 %'));
    expect(status.textContent).toContain('9.18 GB of 20.4 GB');
    expect(status.textContent).toContain('25.0 MB/s');
    expect(status.textContent).toContain('7 min left');
    expect((view.querySelector('progress') as HTMLProgressElement).value).toBe(45);
    expect(view.textContent).toContain('keep chatting with the demo model');

    await fireEvent.click(within(view).getByRole('button', { name: 'Pause' }));
    await waitFor(() => expect(within(view).getByTestId('download-status').textContent).toContain('Paused at 45 %'));
    await fireEvent.click(within(view).getByRole('button', { name: 'Resume download' }));
    expect(backend.ui.StartDownload).toHaveBeenCalledTimes(2);

    backend.setDownload({ ...backend.download, state: 'done', fraction: 1, dir: '/hub/snap' });
    backend.emit({ type: EventType.Model, model: { state: 'loading', name: 'mlx-community/Qwen3.6-35B-A3B-4bit', dir: '/hub/snap', demo: false, progress: 0.3, error: '', backend: '', checking: false, fallback: '' } });
    const done = await within(view).findByTestId('download-done');
    await waitFor(() => expect(done.textContent).toContain('loading… 30 %'));
    expect(done.textContent).toContain('now the model Suzuran uses');
    await fireEvent.click(within(view).getByRole('button', { name: 'Start chatting' }));
    expect(screen.getByTestId('model-state').textContent).toContain('mlx-community/Qwen3.6-35B-A3B-4bit');
  });

  it.each(Object.keys(errorAdvice).filter((k) => k !== 'other'))('explains a %s error and offers to resume', async (kind) => {
    const view = await openWelcome();
    await fireEvent.click(await within(view).findByRole('button', { name: 'Download 20.4 GB' }));
    backend.setDownload({ ...backend.download, state: 'error', errorKind: kind, error: `the service's own words for ${kind}` });
    const alert = await within(view).findByTestId('download-error');
    expect(alert.textContent).toContain(errorAdvice[kind]);
    expect(alert.textContent).toContain(`the service's own words for ${kind}`);
    expect(within(view).getByRole('button', { name: 'Resume download' })).toBeTruthy();
  });

  it('says what went wrong when the plan cannot be made', async () => {
    backend.welcome.error = 'mlx-community/Qwen3.6-35B-A3B-4bit: could not reach https://huggingface.co';
    backend.welcome.errorKind = 'network';
    backend.welcome.findings = [];
    const view = await openWelcome();
    const alert = await within(view).findByTestId('welcome-error');
    expect(alert.textContent).toContain(errorAdvice.network);
    expect(alert.textContent).toContain('could not reach');
    expect(within(view).queryByTestId('machine-check')).toBeNull();
  });

  it('still shows the machine check when the hub is out of reach', async () => {
    backend.welcome.error = 'offline: cannot reach https://huggingface.co';
    backend.welcome.errorKind = 'network';
    backend.welcome.estimated = true;
    backend.welcome.sizeText = '20.4 GB';
    const view = await openWelcome();
    await within(view).findByTestId('welcome-error');
    expect(within(view).getByTestId('machine-check').textContent).toContain(backend.welcome.findings[0].message);
    expect(within(view).getByTestId('machine-check-estimated').textContent).toContain('20.4 GB');
  });
});

describe('model picker', () => {
  it('lists the demo and found models, switches, and names the file of one that cannot be used', async () => {
    backend.models.push(
      { name: 'mlx-community/Qwen3.6-35B-A3B-4bit', dir: '/hub/snap', source: 'Hugging Face cache', size: 20_400_000_000, demo: false, current: false, valid: true, problem: '', removable: true, frees: 20_400_000_000 },
      { name: 'broken', dir: '/lm/broken', source: 'LM Studio', size: 10, demo: false, current: false, valid: false, problem: '/lm/broken/model.safetensors: truncated; download the model again', removable: false, frees: 0 },
    );
    render(App, { backend });
    await screen.findByTestId('version');
    backend.emit({ type: 'command', command: 'settings' });
    const list = await screen.findByTestId('model-choices');
    await waitFor(() => expect(within(list).getAllByRole('radio').length).toBe(3));
    const radios = within(list).getAllByRole('radio') as HTMLInputElement[];
    expect(radios.map((r) => r.checked)).toEqual([true, false, false]);
    expect(radios[2].disabled).toBe(true);
    expect(list.textContent).toContain('model.safetensors: truncated');

    await fireEvent.click(radios[1]);
    await waitFor(() => expect(backend.ui.UseModel).toHaveBeenCalledWith('/hub/snap'));

    // A browser types the folder; a bad one says which file and what to do.
    const field = screen.getByRole('textbox', { name: 'Model folder' });
    await fireEvent.input(field, { target: { value: '/nowhere' } });
    await fireEvent.click(screen.getByRole('button', { name: 'Use this folder' }));
    expect((await screen.findByTestId('model-problem')).textContent).toContain('config.json is missing');
  });
});

describe('welcome on the first run', () => {
  it('opens by itself on the first run, and once left is not opened by itself again', async () => {
    backend.state.showWelcome = true;
    const first = render(App, { backend });
    const view = await screen.findByRole('region', { name: 'Get the model' });
    expect(backend.ui.DismissWelcome).not.toHaveBeenCalled();
    await within(view).findByTestId('welcome-plan');
    await fireEvent.click(within(view).getByRole('button', { name: 'Back to chat' }));
    await waitFor(() => expect(screen.queryByRole('region', { name: 'Get the model' })).toBeNull());
    expect(backend.ui.DismissWelcome).toHaveBeenCalledTimes(1);
    expect(screen.getByTestId('demo-banner')).toBeTruthy();
    first.unmount();

    // The next start: the chat, with the banner's button still there.
    render(App, { backend });
    await screen.findByTestId('version');
    await screen.findByTestId('demo-banner');
    expect(screen.queryByRole('region', { name: 'Get the model' })).toBeNull();
    await fireEvent.click(screen.getByRole('button', { name: 'Get Qwen3.6-35B-A3B' }));
    await screen.findByRole('region', { name: 'Get the model' });
  });

  it('is dismissed when left through the sidebar too', async () => {
    backend.state.showWelcome = true;
    render(App, { backend });
    await screen.findByRole('region', { name: 'Get the model' });
    const sidebar = screen.getByRole('navigation', { name: 'Conversations' });
    await fireEvent.click(within(sidebar).getByRole('button', { name: 'Settings' }));
    await screen.findByRole('region', { name: 'Settings' });
    expect(backend.ui.DismissWelcome).toHaveBeenCalledTimes(1);
  });

  it('can be left while the plan loads and when it failed', async () => {
    backend.state.showWelcome = true;
    backend.ui.Welcome = vi.fn(async () => ({ ...backend.welcome, error: 'offline: HF_HUB_OFFLINE is set', errorKind: 'offline' }));
    render(App, { backend });
    const view = await screen.findByRole('region', { name: 'Get the model' });
    await within(view).findByTestId('welcome-error');
    await fireEvent.click(within(view).getByRole('button', { name: 'Back to chat' }));
    await waitFor(() => expect(screen.queryByRole('region', { name: 'Get the model' })).toBeNull());
    expect(backend.ui.DismissWelcome).toHaveBeenCalledTimes(1);
  });

  it('does not open by itself when the service does not ask', async () => {
    render(App, { backend });
    await screen.findByTestId('version');
    await screen.findByTestId('demo-banner');
    expect(screen.queryByRole('region', { name: 'Get the model' })).toBeNull();
    expect(backend.ui.DismissWelcome).not.toHaveBeenCalled();
  });
});
