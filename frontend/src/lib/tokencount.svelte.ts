// The running count under the composer: how many tokens the message takes
// and how much of the context is left. The service counts with the loaded
// model's tokenizer (UI.CountTokens); the count is asked once typing
// pauses, and an answer to an older text never replaces a newer one.

import type { SendRequest, TokenCount, UI } from './gen/service';
import { formatCount } from './attachments.svelte';

/** The pause in typing after which the count is asked. */
export const countDelayMs = 250;

export class TokenCounter {
  count: TokenCount | null = $state(null);
  error = $state('');
  private timer: ReturnType<typeof setTimeout> | undefined;
  private asked = 0;

  constructor(private ui: () => UI) {}

  /** Counts req once no other request came for countDelayMs. An empty text clears the count. */
  update(req: SendRequest): void {
    clearTimeout(this.timer);
    const n = ++this.asked;
    if (!req.text.trim() && !(req.attachments?.length ?? 0)) {
      this.count = null;
      this.error = '';
      return;
    }
    this.timer = setTimeout(async () => {
      try {
        const c = await this.ui().CountTokens(req);
        if (n !== this.asked) return;
        this.count = c.ready ? c : null;
        this.error = '';
      } catch (e) {
        if (n !== this.asked) return;
        this.count = null;
        this.error = e instanceof Error ? e.message : String(e);
      }
    }, countDelayMs);
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.asked++;
  }
}

/** The line under the composer: "12 tokens · 3,980 of 4,096 left". */
export function countLine(c: TokenCount): string {
  const own = `${formatCount(c.tokens)} ${c.tokens === 1 ? 'token' : 'tokens'}`;
  const docs = c.documentTokens > 0 ? ` + ${formatCount(c.documentTokens)} in documents` : '';
  const left =
    c.leftTokens >= 0
      ? `${formatCount(c.leftTokens)} of ${formatCount(c.contextTokens)} left`
      : `${formatCount(-c.leftTokens)} over the ${formatCount(c.contextTokens)}-token context`;
  return `${own}${docs} · ${left}`;
}
