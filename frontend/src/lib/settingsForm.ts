// The Settings view's pure logic: the context length as typed and as used,
// which field an error of the service concerns, and whether the form
// differs from what is saved.

import type { Settings } from './gen/service';

/** The context lengths the app takes besides 0 (the model's own). */
export const minContext = 512;
export const maxContext = 262_144;

/**
 * The context length a typed value stands for: empty or 0 is the model's
 * own (0); a fraction is rounded to whole tokens and a value out of range
 * to the nearest end of it. `note` says what changed, "" when nothing did.
 */
export function contextLength(typed: number | string | null | undefined): { tokens: number; note: string } {
  const n = typeof typed === 'number' ? typed : Number(String(typed ?? '').replace(/[\s,_]/g, ''));
  if (typed === '' || typed === null || typed === undefined || !Number.isFinite(n) || n === 0) {
    return { tokens: 0, note: Number.isFinite(n) ? '' : 'Not a number: the model’s own length is used.' };
  }
  if (n < 0) return { tokens: 0, note: 'Below 0: the model’s own length is used.' };
  const whole = Math.round(n);
  const tokens = Math.min(maxContext, Math.max(minContext, whole));
  if (tokens === minContext && whole < minContext) {
    return { tokens, note: `Rounded up to ${tokens.toLocaleString('en-US')} tokens, the least a conversation needs.` };
  }
  if (tokens === maxContext && whole > maxContext) {
    return { tokens, note: `Rounded down to ${tokens.toLocaleString('en-US')} tokens, the most the model takes.` };
  }
  if (whole !== n) return { tokens, note: `Rounded to ${tokens.toLocaleString('en-US')} tokens.` };
  return { tokens, note: '' };
}

/** The fields of the Settings view an error can concern. */
export type Field =
  | 'preset'
  | 'temperature'
  | 'top_p'
  | 'top_k'
  | 'min_p'
  | 'presence_penalty'
  | 'context'
  | 'port'
  | 'origins'
  | 'keep_alive'
  | 'prefix_cache'
  | 'shortcut'
  | 'form';

const prefixes: [RegExp, Field][] = [
  [/^sampling preset/i, 'preset'],
  [/^temperature/i, 'temperature'],
  [/^top-p/i, 'top_p'],
  [/^top-k/i, 'top_k'],
  [/^min-p/i, 'min_p'],
  [/^presence penalty/i, 'presence_penalty'],
  [/^context length/i, 'context'],
  [/^API port/i, 'port'],
  [/^CORS origin/i, 'origins'],
  [/^keep-alive/i, 'keep_alive'],
  [/^prefix cache/i, 'prefix_cache'],
  [/shortcut|is taken by another app/i, 'shortcut'],
];

/** The field the service's error message names, or 'form'. */
export function fieldOf(message: string): Field {
  for (const [re, field] of prefixes) if (re.test(message)) return field;
  return 'form';
}

/** The settings the form holds, the origins one per line. */
export function formSettings(form: Settings, origins: string): Settings {
  return {
    ...form,
    context_tokens: contextLength(form.context_tokens).tokens,
    api_cors_origins: origins
      .split('\n')
      .map((o) => o.trim())
      .filter((o) => o !== ''),
  };
}

/** Whether the form holds changes that are not saved. */
export function unsaved(form: Settings, origins: string, saved: Settings): boolean {
  const a = formSettings(form, origins);
  const b = formSettings(saved, saved.api_cors_origins.join('\n'));
  // The thinking switch is saved from the chat, not this form.
  return JSON.stringify({ ...a, thinking: false }) !== JSON.stringify({ ...b, thinking: false });
}

/** Whether the API's own settings differ between two saves. */
export function apiChanged(a: Settings, b: Settings): boolean {
  return (
    a.api_port !== b.api_port ||
    a.api_lan !== b.api_lan ||
    a.api_key !== b.api_key ||
    a.api_cors_origins.join('\n') !== b.api_cors_origins.join('\n')
  );
}

/** The suzuran serve command line that serves the API as saved. */
export function serveCommand(s: Settings): string {
  const host = s.api_lan ? '0.0.0.0' : '127.0.0.1';
  let cmd = `suzuran serve --addr ${host}:${s.api_port}`;
  if (s.api_lan && s.api_key) cmd += ` --api-key ${s.api_key}`;
  if (s.api_cors_origins.length) cmd += ` --cors ${s.api_cors_origins.join(',')}`;
  return cmd;
}
