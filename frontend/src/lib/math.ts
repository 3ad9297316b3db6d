// Math in answers: TeX between $…$ or \(…\) inline and $$…$$ or \[…\] as
// a block, rendered by KaTeX to MathML, which the window's engines (WebKit,
// Chromium) lay out natively: no fonts or style sheet to load, and no
// inline styles for the page's Content-Security-Policy to refuse.

import katex from 'katex';
import type { MarkedExtension, Tokens } from 'marked';

interface MathToken extends Tokens.Generic {
  type: 'math' | 'mathInline';
  raw: string;
  text: string;
  display: boolean;
}

// A block: $$…$$ or \[…\] alone on its lines.
const blockRule = /^(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n+|$)/;

// Inline: $$…$$ and \(…\) as written; $…$ only as TeX is written, so that
// prices ("$5 and $10") stay text: no space inside either dollar, no
// digit right after the closing one, and no backtick inside (a code span
// that follows a price keeps its dollars).
const inlineRules = [
  { re: /^\$\$((?:\\.|[^\\$])+?)\$\$/, display: true },
  { re: /^\\\(((?:\\.|[^\\])+?)\\\)/, display: false },
  { re: /^\$(?![\s$])((?:\\.|[^\\$\n`])*?[^\\\s$`])\$(?!\d)/, display: false },
];

/** renderTeX renders TeX to MathML; a TeX error shows the source, marked as an error. */
export function renderTeX(tex: string, display: boolean): string {
  const html = katex.renderToString(tex, {
    displayMode: display,
    output: 'mathml',
    throwOnError: false,
    trust: false,
    strict: 'ignore',
  });
  // The sanitiser keeps MathML's presentation elements but not
  // <semantics>, whose <annotation> (the TeX source) would then show as
  // text: the presentation is what is kept.
  return html
    .replace(/<annotation encoding="application\/x-tex">[\s\S]*?<\/annotation>/g, '')
    .replace(/<\/?semantics>/g, '');
}

/** mathExtension teaches marked the four TeX delimiters. */
export const mathExtension: MarkedExtension = {
  extensions: [
    {
      name: 'math',
      level: 'block',
      start(src: string) {
        const m = /^(?:\$\$|\\\[)/m.exec(src);
        return m?.index;
      },
      tokenizer(src: string): MathToken | undefined {
        const m = blockRule.exec(src);
        if (!m) return undefined;
        return { type: 'math', raw: m[0], text: (m[1] ?? m[2]).trim(), display: true };
      },
      renderer(token) {
        const t = token as MathToken;
        return `<div class="math-block">${renderTeX(t.text, true)}</div>\n`;
      },
    },
    {
      name: 'mathInline',
      level: 'inline',
      start(src: string) {
        const m = /\$|\\\(/.exec(src);
        return m?.index;
      },
      tokenizer(src: string): MathToken | undefined {
        for (const rule of inlineRules) {
          const m = rule.re.exec(src);
          if (m) return { type: 'mathInline', raw: m[0], text: m[1].trim(), display: rule.display };
        }
        return undefined;
      },
      renderer(token) {
        const t = token as MathToken;
        return renderTeX(t.text, t.display);
      },
    },
  ],
};
