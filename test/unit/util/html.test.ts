import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeHtml, Html, html } from '../../../src/util/html.ts';

test('escapeHtml escapes the five special characters and strips nothing', () => {
  const label = `<script>alert(1)</script> & "Vertrag" Ü 'x'`;
  const escaped = escapeHtml(label);
  assert.equal(escaped, '&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Vertrag&quot; Ü &apos;x&apos;');
  const decoded = escaped
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&apos;', "'")
    .replaceAll('&amp;', '&');
  assert.equal(decoded, label);
});

test('html escapes interpolations, keeps nested Html, drops absent values', () => {
  const inner = html`<b>${'<i>'}</b>`;
  const out = html`<p title="${'"q"'}">${inner}${undefined}${null}${false}${['a<', new Html('<br>')]}</p>`;
  assert.equal(out.text, '<p title="&quot;q&quot;"><b>&lt;i&gt;</b>a&lt;<br></p>');
});
