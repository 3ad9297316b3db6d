import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';

let backend: FakeBackend;

beforeEach(() => {
  backend = new FakeBackend();
  backend.models = [
    { name: 'Suzuran Tiny', dir: '/m', source: 'demo', size: 0, demo: true, current: true, valid: true, problem: '', removable: false, frees: 0 },
    { name: 'Qwen3.6-35B-A3B-4bit', dir: '/models/qwen', source: 'Hugging Face cache', size: 20e9, demo: false, current: false, valid: true, problem: '', removable: false, frees: 0 },
    { name: 'broken', dir: '/models/broken', source: 'LM Studio', size: 0, demo: false, current: false, valid: false, problem: 'config.json is missing', removable: false, frees: 0 },
  ];
});
afterEach(() => cleanup());

async function openMenu() {
  render(App, { backend });
  const button = await screen.findByTestId('model-state');
  expect(button.tagName).toBe('BUTTON');
  expect(button.getAttribute('aria-haspopup')).toBe('menu');
  expect(button.getAttribute('aria-expanded')).toBe('false');
  await fireEvent.click(button);
  const menu = await screen.findByRole('menu', { name: 'Models' });
  expect(button.getAttribute('aria-expanded')).toBe('true');
  return { button, menu };
}

describe('the model picker in the header', () => {
  it('lists the models, the current one checked and focused, an unusable one greyed with its reason', async () => {
    const { button } = await openMenu();
    expect(button.textContent?.trim()).toBe('Suzuran Tiny');
    const items = screen.getAllByRole('menuitemradio');
    expect(items.map((i) => i.textContent?.replace(/\s+/g, ' ').trim())).toEqual([
      'Suzuran Tiny (demo) demo',
      'Qwen3.6-35B-A3B-4bit Hugging Face cache',
      'broken config.json is missing',
    ]);
    expect(items.map((i) => i.getAttribute('aria-checked'))).toEqual(['true', 'false', 'false']);
    expect(items[2].getAttribute('aria-disabled')).toBe('true');
    await waitFor(() => expect(document.activeElement).toBe(items[0]));

    // Choosing the unusable one does nothing; the menu stays.
    await fireEvent.click(items[2]);
    expect(backend.ui.UseModel).not.toHaveBeenCalled();
    // Arrow keys skip it: down from the demo reaches Qwen, then the Settings entry.
    await fireEvent.keyDown(items[0], { key: 'ArrowDown' });
    expect(document.activeElement).toBe(items[1]);
    await fireEvent.keyDown(items[1], { key: 'ArrowDown' });
    expect(document.activeElement?.textContent).toContain('Other models and folders');
  });

  it('switches to the model chosen, and closes', async () => {
    const { button } = await openMenu();
    const qwen = screen.getAllByRole('menuitemradio')[1];
    await fireEvent.keyDown(qwen, { key: 'Enter' });
    await waitFor(() => expect(backend.ui.UseModel).toHaveBeenCalledWith('/models/qwen'));
    expect(screen.queryByRole('menu')).toBeNull();
    expect(document.activeElement).toBe(button);
    // Reopened, the new choice is the checked one.
    await fireEvent.click(button);
    await waitFor(() => expect(screen.getAllByRole('menuitemradio')[1].getAttribute('aria-checked')).toBe('true'));
  });

  it('closes on Escape and on a click elsewhere; its last entry opens Settings', async () => {
    const { button, menu } = await openMenu();
    await fireEvent.keyDown(menu, { key: 'Escape' });
    expect(screen.queryByRole('menu')).toBeNull();
    expect(document.activeElement).toBe(button);

    await fireEvent.click(button);
    await screen.findByRole('menu');
    await fireEvent.click(document.body);
    expect(screen.queryByRole('menu')).toBeNull();

    await fireEvent.click(button);
    await fireEvent.click(await screen.findByText('Other models and folders…'));
    await waitFor(() => expect(document.querySelector('header .title')?.textContent).toBe('Settings'));
    expect(backend.ui.UseModel).not.toHaveBeenCalled();
  });
});
