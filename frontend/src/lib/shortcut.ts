// The global shortcut as the settings view records it: a key pressed with
// modifiers becomes the name app/hotkey reads ("Option+Space",
// "Shift+Cmd+K"). Keys are taken by their position (KeyboardEvent.code),
// as macOS registers them, because on a Mac Option changes the character
// a key types (Option+K types "˚").

const codeNames: Record<string, string> = {
  Space: 'Space',
  Enter: 'Return',
  Tab: 'Tab',
  Escape: 'Escape',
  Backspace: 'Delete',
  ArrowLeft: 'Left',
  ArrowRight: 'Right',
  ArrowUp: 'Up',
  ArrowDown: 'Down',
  Minus: '-',
  Equal: '=',
  BracketLeft: '[',
  BracketRight: ']',
  Semicolon: ';',
  Quote: "'",
  Comma: ',',
  Period: '.',
  Slash: '/',
  Backslash: '\\',
  Backquote: '`',
};

/** The key's name for a KeyboardEvent.code, or null for keys a shortcut cannot use (modifiers among them). */
export function keyName(code: string): string | null {
  if (/^Key[A-Z]$/.test(code)) return code.slice(3);
  if (/^Digit[0-9]$/.test(code)) return code.slice(5);
  if (/^F([1-9]|1[0-2])$/.test(code)) return code;
  return codeNames[code] ?? null;
}

export interface KeyPress {
  code: string;
  ctrlKey: boolean;
  altKey: boolean;
  shiftKey: boolean;
  metaKey: boolean;
}

/**
 * The shortcut a key press makes, in app/hotkey's canonical order (Ctrl,
 * Option, Shift, Cmd), or null when it makes none: a modifier alone, or a
 * key without Ctrl, Option or Cmd (except F1–F12), which is typing.
 */
export function shortcutFromKey(e: KeyPress): string | null {
  const key = keyName(e.code);
  if (!key) return null;
  const functionKey = /^F\d+$/.test(key);
  if (!e.ctrlKey && !e.altKey && !e.metaKey && !functionKey) return null;
  const parts = [];
  if (e.ctrlKey) parts.push('Ctrl');
  if (e.altKey) parts.push('Option');
  if (e.shiftKey) parts.push('Shift');
  if (e.metaKey) parts.push('Cmd');
  parts.push(key);
  return parts.join('+');
}
