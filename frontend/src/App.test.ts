import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, fireEvent, render, screen } from '@testing-library/svelte';
import { tick } from 'svelte';
import App from './App.svelte';

afterEach(() => {
  cleanup();
  delete window.go;
});

describe('chat window', () => {
  it('shows the title, an empty conversation and a disabled Send', () => {
    render(App);
    expect(screen.getByRole('heading', { name: 'Suzuran' })).toBeTruthy();
    expect(screen.getByRole('main', { name: 'Conversation' }).textContent).toContain(
      'Ask anything',
    );
    expect(screen.queryAllByRole('listitem')).toHaveLength(0);
    const send = screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement;
    expect(send.disabled).toBe(true);
  });

  it('adds what is typed to the conversation on Enter and clears the box', async () => {
    render(App);
    const box = screen.getByRole('textbox', { name: 'Message' }) as HTMLTextAreaElement;
    await fireEvent.input(box, { target: { value: '  What does itertools.pairwise do?  ' } });
    expect((screen.getByRole('button', { name: 'Send' }) as HTMLButtonElement).disabled).toBe(
      false,
    );
    await fireEvent.keyDown(box, { key: 'Enter' });

    const items = screen.getAllByRole('listitem');
    expect(items).toHaveLength(1);
    expect(items[0].textContent).toBe('What does itertools.pairwise do?');
    expect(items[0].className).toContain('user');
    expect(box.value).toBe('');
  });

  it('keeps Shift+Enter for a new line and ignores blank messages', async () => {
    render(App);
    const box = screen.getByRole('textbox', { name: 'Message' }) as HTMLTextAreaElement;
    await fireEvent.input(box, { target: { value: '   ' } });
    await fireEvent.keyDown(box, { key: 'Enter' });
    expect(screen.queryAllByRole('listitem')).toHaveLength(0);

    await fireEvent.input(box, { target: { value: 'first line' } });
    await fireEvent.keyDown(box, { key: 'Enter', shiftKey: true });
    expect(screen.queryAllByRole('listitem')).toHaveLength(0);
    expect(box.value).toBe('first line');
  });

  it('shows the version the Go side reports', async () => {
    window.go = { main: { App: { Version: () => Promise.resolve('9.8.7') } } };
    render(App);
    // onMount's promise resolves after the first render.
    await tick();
    await Promise.resolve();
    await tick();
    expect(screen.getByTestId('version').textContent).toBe('9.8.7');
  });
});
