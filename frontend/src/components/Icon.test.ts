import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { FakeBackend } from '../test/fakeBackend';

afterEach(() => cleanup());

/** Expects button to show the named SVG icon and no text a font must draw. */
function expectIcon(button: HTMLElement, icon: string) {
  const svg = button.querySelector('svg');
  expect(svg, `${button.getAttribute('aria-label')}: no svg`).not.toBeNull();
  expect(svg!.dataset.icon).toBe(icon);
  expect(svg!.getAttribute('aria-hidden')).toBe('true');
  expect(svg!.querySelector('path')!.getAttribute('d')).toMatch(/^M/);
  expect(button.textContent!.trim()).toBe('');
}

describe('icons', () => {
  it('draws the icon buttons as inline SVG, each keeping its accessible name', async () => {
    const backend = new FakeBackend();
    backend.addConversation('Pairs', ['What does itertools.pairwise do?']);
    render(App, { backend });
    await screen.findByTestId('version');

    expectIcon(screen.getByRole('button', { name: 'Attach documents' }), 'paperclip');
    expectIcon(screen.getByRole('button', { name: 'Hide conversations' }), 'menu');
    const nav = screen.getByRole('navigation', { name: 'Conversations' });
    expectIcon(await within(nav).findByRole('button', { name: 'Rename Pairs' }), 'pencil');
    expectIcon(within(nav).getByRole('button', { name: 'Delete Pairs' }), 'close');

    const input = screen.getByTestId('file-input') as HTMLInputElement;
    await fireEvent.change(input, { target: { files: [new File(['iris,42\n'], 'stock.csv', { type: 'text/csv' })] } });
    await waitFor(() => expect(backend.pending.size).toBe(1));
    expectIcon(await screen.findByRole('button', { name: 'Cancel stock.csv' }), 'close');
  });

  // Pictographs and symbols (arrows, dingbats, block elements, emoji) are
  // missing from many fonts, Debian's default ones among them: markup must
  // draw such things with Icon or CSS instead. Typographic punctuation
  // (· … “ ” – ×) is in every text font and stays allowed.
  it('uses no symbol or emoji characters in the markup of any component', () => {
    const sources = import.meta.glob(['../**/*.svelte'], { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
    expect(Object.keys(sources).length).toBeGreaterThan(5);
    const symbol = /[\u2190-\u2bff\u{1f000}-\u{1faff}\ufe0f]/u;
    const found = Object.entries(sources).flatMap(([file, text]) =>
      text
        .split('\n')
        .map((line, i) => ({ file, line: i + 1, text: line.trim() }))
        .filter((l) => symbol.test(l.text) && !/^(\/\/|\/\*|\*)/.test(l.text)),
    );
    expect(found).toEqual([]);
  });
});
