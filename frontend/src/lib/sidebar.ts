// The sidebar's pure parts: conversations grouped by when they were last
// used, and search snippets as plain text around the match.

import type { Conversation } from './gen/service';

export interface ConversationGroup {
  label: string;
  conversations: Conversation[];
}

/**
 * groupByDate sorts conversations (newest first, as listed) into Today,
 * Yesterday, Previous 7 days, Previous 30 days and then by month, against
 * now's local calendar day.
 */
export function groupByDate(conversations: Conversation[], now = new Date()): ConversationGroup[] {
  const startOfDay = (d: Date) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const today = startOfDay(now);
  const day = 24 * 60 * 60 * 1000;
  const groups: ConversationGroup[] = [];
  const month = new Intl.DateTimeFormat('en', { month: 'long', year: 'numeric' });
  for (const c of conversations) {
    const t = c.updatedAt;
    let label: string;
    if (t >= today) label = 'Today';
    else if (t >= today - day) label = 'Yesterday';
    else if (t >= today - 7 * day) label = 'Previous 7 days';
    else if (t >= today - 30 * day) label = 'Previous 30 days';
    else label = month.format(new Date(t));
    const last = groups.at(-1);
    if (last?.label === label) last.conversations.push(c);
    else groups.push({ label, conversations: [c] });
  }
  return groups;
}

/** plainText drops the Markdown marks a snippet may carry: emphasis, code ticks, headings, links' targets. */
export function plainText(markdown: string): string {
  return markdown
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/^\s{0,3}(#{1,6}|>|[-*+]|\d+[.)])\s+/gm, '')
    .replace(/(\*\*|__|\*|_|~~|`+)(?=\S)([\s\S]*?\S)\1/g, '$2')
    .replace(/`+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

export interface SnippetPart {
  text: string;
  match: boolean;
}

/**
 * snippetParts makes a snippet plain text, cut to about width characters
 * so that the first match of query shows, and split into the parts to
 * highlight (case-insensitive).
 */
export function snippetParts(snippet: string, query: string, width = 60): SnippetPart[] {
  let text = plainText(snippet);
  const q = query.trim().toLowerCase();
  let at = q ? text.toLowerCase().indexOf(q) : -1;
  if (at > width / 3) {
    const from = Math.max(0, text.lastIndexOf(' ', at - 12) + 1);
    text = '…' + text.slice(from);
    at = text.toLowerCase().indexOf(q);
  }
  if (!q || at < 0) return [{ text, match: false }];
  const parts: SnippetPart[] = [];
  let rest = 0;
  const lower = text.toLowerCase();
  for (let i = lower.indexOf(q); i >= 0; i = lower.indexOf(q, i + q.length)) {
    if (i > rest) parts.push({ text: text.slice(rest, i), match: false });
    parts.push({ text: text.slice(i, i + q.length), match: true });
    rest = i + q.length;
  }
  if (rest < text.length) parts.push({ text: text.slice(rest), match: false });
  return parts;
}
