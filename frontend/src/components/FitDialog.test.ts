import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen } from '@testing-library/svelte';
import FitDialog from './FitDialog.svelte';
import { Keep, type FitView } from '../lib/gen/service';

afterEach(() => cleanup());

const fit = {
  message: 'The documents are longer than the room left in the context.',
  documentTokens: 9000,
  availableTokens: 3000,
  contextTokens: 8192,
  conversationTokens: 200,
  answerTokens: 1000,
  noRoom: false,
} as unknown as FitView;

describe('FitDialog', () => {
  it('takes the focus, keeps Tab inside and closes on Esc as Cancel', async () => {
    const onchoose = vi.fn();
    render(FitDialog, { fit, onchoose });
    const dialog = screen.getByRole('alertdialog', { name: 'The documents do not fit' });
    const [beginning, end, cancel] = ['Keep the beginning', 'Keep the end', 'Cancel'].map((name) =>
      screen.getByRole('button', { name }),
    );
    expect(document.activeElement).toBe(beginning);
    await fireEvent.keyDown(dialog, { key: 'Tab' });
    expect(document.activeElement).toBe(end);
    await fireEvent.keyDown(dialog, { key: 'Tab' });
    expect(document.activeElement).toBe(cancel);
    await fireEvent.keyDown(dialog, { key: 'Tab' });
    expect(document.activeElement).toBe(beginning);
    await fireEvent.keyDown(dialog, { key: 'Tab', shiftKey: true });
    expect(document.activeElement).toBe(cancel);
    await fireEvent.keyDown(dialog, { key: 'Escape' });
    expect(onchoose).toHaveBeenCalledWith(null);
    await fireEvent.click(end);
    expect(onchoose).toHaveBeenLastCalledWith(Keep.End);
  });
});
