import { describe, expect, it } from 'vitest';
import { keyName, shortcutFromKey } from './shortcut';

const press = (code: string, mods: Partial<{ ctrlKey: boolean; altKey: boolean; shiftKey: boolean; metaKey: boolean }> = {}) => ({
  code,
  ctrlKey: false,
  altKey: false,
  shiftKey: false,
  metaKey: false,
  ...mods,
});

describe('shortcutFromKey', () => {
  it.each([
    [press('Space', { altKey: true }), 'Option+Space'],
    [press('KeyK', { metaKey: true, shiftKey: true }), 'Shift+Cmd+K'],
    [press('KeyA', { ctrlKey: true, altKey: true, shiftKey: true, metaKey: true }), 'Ctrl+Option+Shift+Cmd+A'],
    [press('Digit1', { altKey: true }), 'Option+1'],
    [press('Enter', { ctrlKey: true }), 'Ctrl+Return'],
    [press('ArrowUp', { metaKey: true, altKey: true }), 'Option+Cmd+Up'],
    [press('Slash', { metaKey: true }), 'Cmd+/'],
    [press('F5'), 'F5'],
    [press('F12', { shiftKey: true }), 'Shift+F12'],
  ])('%o → %s', (e, want) => {
    expect(shortcutFromKey(e)).toBe(want);
  });

  it.each([
    ['a modifier alone', press('AltLeft', { altKey: true })],
    ['a letter without a modifier', press('KeyK')],
    ['a letter with Shift only', press('KeyK', { shiftKey: true })],
    ['a key shortcuts cannot use', press('NumpadAdd', { metaKey: true })],
    ['F13', press('F13', { metaKey: true })],
  ])('makes none from %s', (_, e) => {
    expect(shortcutFromKey(e)).toBeNull();
  });

  it('names keys by position', () => {
    expect(keyName('KeyQ')).toBe('Q');
    expect(keyName('Backspace')).toBe('Delete');
    expect(keyName('ShiftLeft')).toBeNull();
  });
});
