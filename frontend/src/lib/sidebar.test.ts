import { describe, expect, it } from 'vitest';
import { groupByDate, plainText, snippetParts } from './sidebar';

const at = (y: number, m: number, d: number, h = 12) => new Date(y, m - 1, d, h).getTime();
const conv = (id: number, updatedAt: number) => ({
  id,
  title: `c${id}`,
  createdAt: updatedAt,
  updatedAt,
  settings: { systemPrompt: '', thinking: '', samplingPreset: '' },
});

describe('groupByDate', () => {
  it('groups by the local calendar day, newest first', () => {
    const now = new Date(2026, 11, 2, 9); // 2 December 2026, 09:00
    const groups = groupByDate(
      [
        conv(1, at(2026, 12, 2, 8)),
        conv(2, at(2026, 12, 2, 0)),
        conv(3, at(2026, 12, 1, 23)),
        conv(4, at(2026, 11, 28)),
        conv(5, at(2026, 11, 10)),
        conv(6, at(2026, 10, 20)),
        conv(7, at(2026, 10, 2)),
        conv(8, at(2025, 12, 31)),
      ],
      now,
    );
    expect(groups.map((g) => [g.label, g.conversations.map((c) => c.id)])).toEqual([
      ['Today', [1, 2]],
      ['Yesterday', [3]],
      ['Previous 7 days', [4]],
      ['Previous 30 days', [5]],
      ['October 2026', [6, 7]],
      ['December 2025', [8]],
    ]);
  });
});

describe('snippets', () => {
  it('drops Markdown marks', () => {
    expect(plainText('**json.dumps** turns `obj` into [text](https://x.example):\n\n- one\n# Two')).toBe(
      'json.dumps turns obj into text: one Two',
    );
  });

  it('highlights every match, case-insensitive, in plain text', () => {
    expect(snippetParts('Use **itertools.pairwise** for Pairwise', 'pairwise')).toEqual([
      { text: 'Use itertools.', match: false },
      { text: 'pairwise', match: true },
      { text: ' for ', match: false },
      { text: 'Pairwise', match: true },
    ]);
  });

  it('cuts the start of a long snippet so that the match shows', () => {
    const parts = snippetParts('A long answer that starts with many words before it ever reaches the word zipfile at last', 'zipfile');
    const text = parts.map((p) => p.text).join('');
    expect(text.startsWith('…')).toBe(true);
    expect(text.indexOf('zipfile')).toBeLessThan(25);
    expect(parts.find((p) => p.match)?.text).toBe('zipfile');
  });

  it('shows a snippet without a query as it is', () => {
    expect(snippetParts('plain *text*', '')).toEqual([{ text: 'plain text', match: false }]);
  });
});
