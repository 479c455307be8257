/** The bank's consent page HTML: escaping of labels (spec 2.7), default document text, stable form fields. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { consentPage, errorPage, insufficientPage } from '../../../../src/sandbox/as/consent-page.ts';
import type { ConsentView, IdentityView } from '../../../../src/sandbox/as/consent-view.ts';
import { DEFAULT_SIGNING_DOCUMENTS } from '../../../../src/sandbox/platform/sp-record.ts';

const LABEL = '<script>alert(1)</script> & "Vertrag" Ü';
const ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Vertrag&quot; Ü';

const erika: IdentityView = {
  sub: 'user-4711',
  description: 'Default user',
  displayName: 'Erika Mustermann',
  shared: [{ name: 'given_name', title: 'Given name', value: 'Erika' }],
  omitted: ['address'],
};
const thin: IdentityView = {
  sub: 'user-0815',
  description: 'Thin <data>',
  displayName: 'Max Mustermann',
  shared: [],
  omitted: [],
  insufficient: { sub: 'user-0815', missing: ['address'], description: 'no address' },
};

function view(change: Partial<ConsentView> = {}): ConsentView {
  return {
    bankName: 'Sandbox Bank',
    rp: { clientId: 'rp-<1>' },
    qtsp: {
      name: 'QTSP & Co',
      tosUri: 'https://qtsp.example/tos?v=1&x="2"',
      tosLabel: 'Nutzungsbedingungen <AGB>',
      policyUri: 'https://qtsp.example/policy/v1/',
    },
    consentId: 'id-1',
    csrfToken: 'tok-1',
    documents: [
      { label: LABEL, hash: 'aGFzaA==' },
      { label: '', hash: 'ZGVm', defaultDocument: DEFAULT_SIGNING_DOCUMENTS[0]! },
    ],
    identities: [erika, thin],
    selectedSub: 'user-0815',
    secondFactorHint: '123456',
    ...change,
  };
}

describe('consentPage', () => {
  it('escapes a hostile label and strips nothing', () => {
    const out = consentPage(view()).text;
    assert.ok(out.includes(`<bdi class="document-label">${ESCAPED}</bdi>`), out);
    assert.equal(out.includes('<script>'), false);
    assert.ok(out.includes('href="https://qtsp.example/tos?v=1&amp;x=&quot;2&quot;"'));
    assert.ok(out.includes('Nutzungsbedingungen &lt;AGB&gt;'));
    assert.ok(out.includes('QTSP &amp; Co'));
    assert.ok(out.includes('<code id="rp-client-id">rp-&lt;1&gt;</code>'));
  });

  it('isolates labels, the purpose and the RP name, and shows their bidirectional controls', () => {
    const out = consentPage(
      view({
        documents: [{ label: 'invoice\u202Egnp.exe', hash: 'aGFzaA==' }],
        purpose: 'pay \u2067\u05D0\u2069',
        rp: { clientId: 'rp-1', name: 'Shop\u200F' },
      }),
    ).text;
    assert.ok(out.includes('<bdi class="document-label">invoice⟨U+202E⟩gnp.exe</bdi>'), out);
    assert.ok(out.includes('<bdi id="purpose">pay ⟨U+2067⟩\u05D0⟨U+2069⟩</bdi>'), out);
    assert.ok(out.includes('<bdi id="rp-name">Shop⟨U+200F⟩</bdi>'), out);
    assert.equal(/[\u202A-\u202E\u2066-\u2069\u200E\u200F]/.test(out), false, 'no control acts');
  });

  it('shows the full text of a default document', () => {
    const out = consentPage(view()).text;
    assert.ok(out.includes(`<div class="doc default-document-text">${DEFAULT_SIGNING_DOCUMENTS[0]!.text}</div>`));
  });

  it('has the stable fields, the chosen identity checked, the hint, and an error when given', () => {
    const out = consentPage(view({ error: 'wrong <code>' })).text;
    for (const field of [
      'name="consent_id" value="id-1"',
      'name="csrf_token" value="tok-1"',
      'name="otp" id="otp"',
      'name="action" value="consent" id="consent"',
      'name="action" value="cancel" id="cancel"',
      'name="action" value="select_bank" id="select-bank"',
      'action="/authorize/consent"',
    ])
      assert.ok(out.includes(field), field);
    assert.match(out, /id="identity-user-0815" value="user-0815" checked>/);
    assert.match(out, /id="identity-user-4711" value="user-4711">/);
    assert.ok(out.includes('Thin &lt;data&gt;'));
    assert.ok(out.includes('the code is always 123456'));
    assert.ok(out.includes('wrong &lt;code&gt;'));
    assert.ok(out.includes('The bank lacks data this signature needs: Address.'));
    assert.ok(out.includes('Not on record, not shared: Address'));
  });

  it('names the RP by its display name when it has one', () => {
    const out = consentPage(view({ rp: { clientId: 'rp-1', name: 'Shop <GmbH>' } })).text;
    assert.ok(out.includes('<strong><bdi id="rp-name">Shop &lt;GmbH&gt;</bdi></strong>'));
  });
});

describe('insufficientPage and errorPage', () => {
  it('states the problem and that nothing is shared, with one acknowledge button', () => {
    const v = view();
    const out = insufficientPage({ ...v, identity: thin }).text;
    assert.ok(out.includes('<strong id="missing">Address</strong>'));
    assert.ok(out.includes('No data has been shared with <bdi>rp-&lt;1&gt;</bdi> or with QTSP &amp; Co.'));
    assert.ok(out.includes('name="action" value="acknowledge" id="continue"'));
    assert.ok(out.includes('name="csrf_token" value="tok-1"'));
  });

  it('escapes the message of the error page', () => {
    assert.ok(errorPage('<b>').text.includes('&lt;b&gt;'));
  });
});
