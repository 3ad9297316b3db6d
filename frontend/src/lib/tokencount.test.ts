import { afterEach, describe, expect, it, vi } from 'vitest';
import { TokenCounter, countDelayMs, countLine } from './tokencount.svelte';
import type { TokenCount, UI } from './gen/service';

afterEach(() => vi.useRealTimers());

function count(tokens: number, left: number, documentTokens = 0): TokenCount {
  return { ready: true, tokens, promptTokens: tokens + 10, documentTokens, contextTokens: 4096, leftTokens: left };
}

describe('the running token count', () => {
  it('asks once typing pauses, and an older answer never replaces a newer one', async () => {
    vi.useFakeTimers();
    const answers: ((c: TokenCount) => void)[] = [];
    const CountTokens = vi.fn(() => new Promise<TokenCount>((resolve) => answers.push(resolve)));
    const counter = new TokenCounter(() => ({ CountTokens }) as unknown as UI);
    for (const text of ['H', 'He', 'Hel', 'Hello']) counter.update({ conversationId: 0, text, think: false });
    await vi.advanceTimersByTimeAsync(countDelayMs - 1);
    expect(CountTokens).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(CountTokens).toHaveBeenCalledTimes(1);
    expect(CountTokens).toHaveBeenCalledWith(expect.objectContaining({ text: 'Hello' }));

    // A second text is asked while the first is still counted; the first's answer comes last.
    counter.update({ conversationId: 0, text: 'Hello there', think: false });
    await vi.advanceTimersByTimeAsync(countDelayMs);
    answers[1](count(3, 4000));
    await vi.advanceTimersByTimeAsync(0);
    answers[0](count(2, 4001));
    await vi.advanceTimersByTimeAsync(0);
    expect(counter.count?.tokens).toBe(3);

    // Emptied: no count, nothing asked.
    counter.update({ conversationId: 0, text: '  ', think: false });
    await vi.advanceTimersByTimeAsync(countDelayMs * 2);
    expect(counter.count).toBeNull();
    expect(CountTokens).toHaveBeenCalledTimes(2);
  });

  it('shows nothing when no model is loaded, and the service\'s reason when it refuses', async () => {
    vi.useFakeTimers();
    let next: () => Promise<TokenCount> = async () => ({ ...count(0, 0), ready: false });
    const counter = new TokenCounter(() => ({ CountTokens: () => next() }) as unknown as UI);
    counter.update({ conversationId: 0, text: 'Hello', think: false });
    await vi.advanceTimersByTimeAsync(countDelayMs);
    expect(counter.count).toBeNull();
    next = async () => {
      throw new Error('the message is 300 KB, too long to count');
    };
    counter.update({ conversationId: 0, text: 'Hello!', think: false });
    await vi.advanceTimersByTimeAsync(countDelayMs);
    expect(counter.error).toBe('the message is 300 KB, too long to count');
  });

  it('writes the tokens, the documents and what is left of the context', () => {
    expect(countLine(count(1, 4085))).toBe('1 token · 4,085 of 4,096 left');
    expect(countLine(count(12, 2000, 2074))).toBe('12 tokens + 2,074 in documents · 2,000 of 4,096 left');
    expect(countLine(count(5000, -924))).toBe('5,000 tokens · 924 over the 4,096-token context');
  });
});
