// Markdown to safe HTML for the model's answers: marked parses (GitHub
// flavour), highlight.js colours code blocks, and DOMPurify removes
// anything that could run (script, event handlers, javascript: URLs, raw
// HTML's dangerous parts) from the result. The model's output is untrusted
// text: a prompt injected through a document could make it write HTML.

import { Marked, Renderer, type Tokens } from 'marked';
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/common';
import { mathExtension } from './math';

const marked = new Marked(mathExtension, {
  gfm: true,
  breaks: false,
  renderer: {
    // A wide table scrolls inside the answer instead of squeezing its
    // words apart.
    table(token: Tokens.Table) {
      return `<div class="table-wrap">${Renderer.prototype.table.call(this, token)}</div>\n`;
    },
    // A task list's box is drawn, not a form control: the answer is text
    // (the sanitiser refuses inputs), and a box that cannot be ticked
    // should not look as if it could.
    checkbox({ checked }: Tokens.Checkbox) {
      return `<span class="task-box${checked ? ' done' : ''}" role="img" aria-label="${checked ? 'done' : 'not done'}"></span> `;
    },
    listitem(item: Tokens.ListItem) {
      const html = Renderer.prototype.listitem.call(this, item);
      return item.task ? html.replace(/^<li>/, '<li class="task">') : html;
    },
    code({ text, lang }) {
      const language = (lang ?? '').trim().split(/\s+/)[0];
      const known = language && hljs.getLanguage(language);
      const html = known
        ? hljs.highlight(text, { language, ignoreIllegals: true }).value
        : escapeHTML(text);
      const label = known ? language : '';
      return (
        `<div class="code-block"><div class="code-head"><span>${escapeHTML(label)}</span>` +
        `<button type="button" class="copy-code" aria-label="Copy code">Copy</button></div>` +
        `<pre><code class="hljs${label ? ` language-${escapeHTML(label)}` : ''}">${html}</code></pre></div>`
      );
    },
  },
});

function escapeHTML(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

// Links open outside the app window; DOMPurify keeps only safe URL schemes.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.getAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

/** renderMarkdown turns the model's Markdown into sanitised HTML. */
export function renderMarkdown(markdown: string): string {
  const html = marked.parse(markdown, { async: false }) as string;
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'textarea', 'select', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style'],
  });
}
