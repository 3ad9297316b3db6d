import { describe, expect, it } from 'vitest';
import { renderMarkdown } from './markdown';

function dom(markdown: string): HTMLElement {
  const div = document.createElement('div');
  div.innerHTML = renderMarkdown(markdown);
  return div;
}

describe('renderMarkdown', () => {
  it('renders Markdown: emphasis, lists, inline code, links', () => {
    const d = dom('**json.dumps** turns `obj` into text:\n\n- one\n- two\n\n[docs](https://docs.python.org/3/library/json.html)');
    expect(d.querySelector('strong')?.textContent).toBe('json.dumps');
    expect(d.querySelector('code')?.textContent).toBe('obj');
    expect(d.querySelectorAll('li')).toHaveLength(2);
    const a = d.querySelector('a')!;
    expect(a.getAttribute('href')).toBe('https://docs.python.org/3/library/json.html');
    expect(a.getAttribute('target')).toBe('_blank');
    expect(a.getAttribute('rel')).toBe('noopener noreferrer');
  });

  it('highlights code blocks and gives them a Copy button', () => {
    const d = dom('```python\nimport json\nprint(json.dumps({"a": 1}))\n```');
    const code = d.querySelector('pre code')!;
    expect(code.className).toContain('language-python');
    expect(code.querySelector('.hljs-keyword')?.textContent).toBe('import');
    expect(code.textContent).toBe('import json\nprint(json.dumps({"a": 1}))');
    expect(d.querySelector('button.copy-code')?.getAttribute('aria-label')).toBe('Copy code');
  });

  it('escapes code in an unknown language', () => {
    const d = dom('```nosuchlang\n<b>not bold</b>\n```');
    expect(d.querySelector('b')).toBeNull();
    expect(d.querySelector('code')?.textContent).toContain('<b>not bold</b>');
  });

  // Each payload must come out inert: no element that runs script, no
  // event handler attribute, no javascript: URL.
  const payloads = [
    '<img src=x onerror="alert(1)">',
    '<script>alert(1)</script>',
    '[click](javascript:alert(1))',
    '<a href="javascript:alert(1)">x</a>',
    '<a href="JaVaScRiPt:alert(1)">x</a>',
    '<svg onload="alert(1)"><circle r="1"/></svg>',
    '<iframe src="https://evil.example"></iframe>',
    '<div style="background:url(javascript:alert(1))" onclick="alert(1)">x</div>',
    '![x](javascript:alert(1))',
    '<form action="https://evil.example"><input name="q"><button>go</button></form>',
    '<details open ontoggle="alert(1)">x</details>',
    // TeX is rendered by KaTeX and then sanitised like the rest.
    '$\\href{javascript:alert(1)}{x}$',
    '$$\\htmlData{onload=alert(1)}{x}$$',
    '\\(<img src=x onerror=alert(1)>\\)',
    '$x$<math><mtext><img src=x onerror="alert(1)"></mtext></math>',
  ];
  for (const payload of payloads) {
    it(`renders ${payload} inert`, () => {
      const d = dom(payload);
      expect(d.querySelector('script, iframe, form, input, object, embed')).toBeNull();
      for (const el of d.querySelectorAll('*')) {
        for (const attr of el.getAttributeNames()) {
          expect(attr.startsWith('on'), `${el.tagName} has ${attr}`).toBe(false);
          expect(attr).not.toBe('style');
          expect(el.getAttribute(attr)?.toLowerCase()).not.toContain('javascript:');
        }
      }
    });
  }

  it('keeps the text of raw HTML it drops', () => {
    const d = dom('before <script>alert(1)</script> after <b>bold</b>');
    expect(d.textContent).toContain('before');
    expect(d.textContent).toContain('after');
    expect(d.querySelector('b')?.textContent).toBe('bold');
  });

  it('puts a table in a scrolling frame, with its header row', () => {
    const d = dom('| Function | What it does |\n|---|---:|\n| `os.path.join` | joins path parts |');
    const wrap = d.querySelector('.table-wrap')!;
    expect(wrap).not.toBeNull();
    expect(wrap.querySelectorAll('thead th')).toHaveLength(2);
    expect(wrap.querySelector('tbody td code')?.textContent).toBe('os.path.join');
    expect(wrap.querySelectorAll('th')[1].getAttribute('align')).toBe('right');
  });

  it('draws task lists with their boxes, ticked or not', () => {
    const d = dom('- [x] read the file\n- [ ] answer');
    const items = d.querySelectorAll('li.task');
    expect(items).toHaveLength(2);
    expect(items[0].querySelector('.task-box.done')?.getAttribute('aria-label')).toBe('done');
    expect(items[1].querySelector('.task-box:not(.done)')?.getAttribute('aria-label')).toBe('not done');
    expect(items[1].textContent?.trim()).toBe('answer');
  });

  it('keeps blockquotes', () => {
    expect(dom('> quoted *text*').querySelector('blockquote em')?.textContent).toBe('text');
  });

  it('renders the four TeX delimiters as MathML', () => {
    const d = dom('Inline $e^{i\\pi}+1=0$ and \\(a^2\\).\n\n$$\n\\frac{1}{2}\n$$\n\n\\[ \\sum_i i \\]');
    const inline = d.querySelectorAll('p math');
    expect(inline).toHaveLength(2);
    expect(inline[0].querySelector('msup mi')?.textContent).toBe('e');
    const blocks = d.querySelectorAll('.math-block math');
    expect(blocks).toHaveLength(2);
    expect(blocks[0].getAttribute('display')).toBe('block');
    expect(blocks[0].querySelector('mfrac')).not.toBeNull();
    expect(blocks[1].querySelector('munder mo')?.textContent).toBe('∑');
    // The TeX source is not shown beside its rendering.
    expect(d.textContent).not.toContain('\\frac');
  });

  it('leaves prices, code and a lone dollar as text', () => {
    const d = dom('It costs $5 and $10, or `$x$` in code, and $ alone.');
    expect(d.querySelector('math')).toBeNull();
    expect(d.textContent?.trim()).toBe('It costs $5 and $10, or $x$ in code, and $ alone.');
  });

  it('shows a TeX error as text, not as raw markup', () => {
    const d = dom('$\\nosuchmacro{x}$');
    expect(d.querySelector('math')?.textContent).toContain('\\nosuchmacro');
  });
});
