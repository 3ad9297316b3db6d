import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';
import { EventType, type ModelState } from '../lib/gen/service';

const message = 'Running on the CPU: the GPU check failed — the GPU kernels did not compile; answers are slower';

let backend: FakeBackend;
let writeText: ReturnType<typeof vi.fn>;

beforeEach(() => {
  backend = new FakeBackend();
  writeText = vi.fn(async () => {});
  Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
});
afterEach(() => cleanup());

function model(change: Partial<ModelState>): ModelState {
  return { ...backend.state.model, demo: false, name: 'Qwen3.6-35B-A3B-4bit', ...change };
}

async function renderApp() {
  render(App, { backend });
  await screen.findByTestId('version');
}

describe('the GPU fallback', () => {
  it('says the GPU is being checked before the model is ready', async () => {
    await renderApp();
    backend.emit({ type: EventType.Model, model: model({ state: 'loading', progress: 0.95, checking: true }) });
    expect((await screen.findByRole('status')).textContent).toContain('Checking the GPU before Qwen3.6-35B-A3B-4bit is ready…');
    expect(screen.queryByTestId('fallback-banner')).toBeNull();
  });

  it('says in words why it runs on the CPU, and copies the doctor report', async () => {
    await renderApp();
    expect(screen.queryByTestId('fallback-banner')).toBeNull();
    backend.emit({ type: EventType.Model, model: model({ state: 'ready', backend: 'cpu: 8 threads', fallback: message }) });
    const banner = await screen.findByTestId('fallback-banner');
    expect(banner.textContent).toContain(message);
    await fireEvent.click(within(banner).getByRole('button', { name: 'Copy report' }));
    await waitFor(() => expect(writeText).toHaveBeenCalledWith('{"schema": 1, "ok": false}\n'));
    expect(backend.ui.Report).toHaveBeenCalledTimes(1);
    expect((await within(banner).findByRole('status')).textContent).toContain('Copied');
  });

  it('shows the error when the report cannot be written, and copies nothing', async () => {
    backend.ui.Report = vi.fn(async () => {
      throw new Error('no report in this build: run `suzuran doctor --json` in a terminal');
    });
    await renderApp();
    backend.emit({ type: EventType.Model, model: model({ state: 'ready', backend: 'cpu: 8 threads', fallback: message }) });
    const banner = await screen.findByTestId('fallback-banner');
    await fireEvent.click(within(banner).getByRole('button', { name: 'Copy report' }));
    expect((await screen.findByText(/no report in this build/)).textContent).toContain('suzuran doctor --json');
    expect(writeText).not.toHaveBeenCalled();
    expect(within(banner).queryByRole('status')).toBeNull();
  });

  it('runs the GPU check again from Settings', async () => {
    await renderApp();
    backend.emit({ type: EventType.Model, model: model({ state: 'ready', backend: 'cpu: 8 threads', fallback: message }) });
    await screen.findByTestId('fallback-banner');
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    const gpu = await screen.findByTestId('gpu-check');
    expect(gpu.textContent).toContain(message);
    await fireEvent.click(within(gpu).getByRole('button', { name: 'Check the GPU again' }));
    await waitFor(() => expect(backend.ui.RecheckGPU).toHaveBeenCalledTimes(1));
  });

  it('hides the GPU section on the CPU chosen by the user', async () => {
    await renderApp();
    await fireEvent.click(screen.getByRole('button', { name: 'Settings' }));
    await screen.findByRole('region', { name: 'Settings' });
    expect(screen.queryByTestId('gpu-check')).toBeNull();
  });
});
