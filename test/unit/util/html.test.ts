import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeHtml, Html, html, isolated, showBidiControls } from '../../../src/util/html.ts';

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

test('showBidiControls makes every bidirectional control visible and keeps all other text', () => {
  const controls = [0x61c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069];
  for (const cp of controls) {
    const name = `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
    assert.equal(showBidiControls(`a${String.fromCodePoint(cp)}b`), `a⟨${name}⟩b`);
  }
  // letters of right-to-left scripts are text, not controls: they stay
  assert.equal(showBidiControls('\u05D0\u0627 \u200D x'), '\u05D0\u0627 \u200D x');
});

test('isolated wraps escaped text in <bdi> with its controls shown', () => {
  assert.equal(isolated('<a>\u202E').text, '<bdi>&lt;a&gt;⟨U+202E⟩</bdi>');
  assert.equal(isolated('x', { id: 'i"d', className: 'c' }).text, '<bdi id="i&quot;d" class="c">x</bdi>');
});
