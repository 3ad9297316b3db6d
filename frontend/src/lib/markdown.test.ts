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
});
