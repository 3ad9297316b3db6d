import { describe, expect, it } from 'vitest';
import { demoQuestions } from './demo';
import greedy from '../../../engine/internal/fixtures/testdata/demo/greedy.json';

describe('demo questions', () => {
  it('are questions the demo model answers right (its greedy answers from transformers)', () => {
    const cases = new Map(greedy.cases.map((c: { question: string; greedy_text: string }) => [c.question, c.greedy_text]));
    for (const q of demoQuestions) {
      const answer = cases.get(q);
      expect(answer, q).toBeTruthy();
      // An answer about a function names it; the model's own introduction names itself.
      const name = q.match(/[a-z_]+\.[a-z_.]+[a-z]/i)?.[0] ?? 'Suzuran Tiny';
      expect(answer, q).toContain(name);
    }
  });
});
