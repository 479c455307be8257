/**
 * The HTML of the bank's login and consent page (spec 2.7, 5.10, 7.3): every value goes through the escaping
 * template of util/html.ts, labels are escaped and never stripped (spec 2.7); text the RP chose (labels, purpose,
 * its name) is isolated with its bidirectional controls made visible, so it cannot reorder what the user reads.
 * Form fields keep stable names and ids: consent_id, csrf_token, identity (radio, id identity-<sub>), otp;
 * buttons name=action with the values consent, cancel, select_bank (ids consent, cancel, select-bank) and
 * acknowledge (id continue).
 */
import { Html, html, isolated } from '../../util/html.ts';
import {
  type ConsentView,
  claimTitle,
  type DocumentView,
  type IdentityView,
  type InsufficientView,
  type PartiesView,
} from './consent-view.ts';

/** Where both forms post (same origin: CSP form-action 'self'). */
export const CONSENT_PATH = '/authorize/consent';

function rpName(v: PartiesView): Html {
  return isolated(v.rp.name ?? v.rp.clientId);
}

function partiesSection(v: PartiesView, purpose: string | undefined): Html {
  const q = v.qtsp;
  return html`<section id="parties">
<p id="rp">Requested by ${
    v.rp.name ? html`<strong>${isolated(v.rp.name, { id: 'rp-name' })}</strong> (client_id ` : 'client_id '
  }<code id="rp-client-id">${v.rp.clientId}</code>${v.rp.name ? ')' : ''}</p>
${purpose === undefined ? '' : html`<p>Purpose: ${isolated(purpose, { id: 'purpose' })}</p>`}
<p id="qtsp">Signed by the trust service provider <strong id="qtsp-name">${q.name}</strong>.
By consenting you accept its <a id="tos" href="${q.tosUri}">${q.tosLabel}</a>
and its <a id="policy" href="${q.policyUri}">privacy policy</a>.</p>
</section>`;
}

/** Spec 2.7: the label as sent, nothing stripped; isolated, its bidirectional controls shown (util/html.ts). */
function label(d: DocumentView): Html {
  return isolated(d.label, { className: 'document-label' });
}

function documentItem(d: DocumentView): Html {
  if (d.defaultDocument) {
    return html`<li class="document default-document">${label(d)}
<p>Default document of the trust service provider (language ${d.defaultDocument.lang}), full text:</p>
<div class="doc default-document-text">${d.defaultDocument.text}</div>
<small>hash <code class="document-hash">${d.hash}</code></small></li>`;
  }
  return html`<li class="document">${label(d)}<br>
<small>hash <code class="document-hash">${d.hash}</code></small></li>`;
}

function documentsSection(docs: readonly DocumentView[]): Html {
  return html`<section id="documents"><h2>Documents to sign (${docs.length})</h2>
<ol>${docs.map(documentItem)}</ol></section>`;
}

function sharedData(i: IdentityView, qtspName: string): Html {
  if (i.insufficient) {
    const missing = i.insufficient.missing.map(claimTitle).join(', ');
    return html`<p class="error identity-problem">The bank lacks data this signature needs: ${missing}.
Signing is not possible with this identity.</p>`;
  }
  const rows = i.shared.map(
    (c) => html`<tr data-claim="${c.name}"><th>${c.title}</th><td class="claim-value">${c.value}</td></tr>`,
  );
  const omitted = i.omitted.length
    ? html`<p class="hint">Not on record, not shared: ${i.omitted.map(claimTitle).join(', ')}</p>`
    : '';
  return html`<p>Shared with ${qtspName} for your certificate:</p>
<table class="shared-claims">${rows}</table>${omitted}`;
}

function identityOption(i: IdentityView, selected: boolean, qtspName: string): Html {
  const id = `identity-${i.sub}`;
  return html`<div class="identity" data-sub="${i.sub}">
<label for="${id}"><input type="radio" name="identity" id="${id}" value="${i.sub}"${
    selected ? html` checked` : ''
  }> <strong class="identity-name">${i.displayName}</strong> <code>${i.sub}</code>
<br><small>${i.description}</small></label>
${sharedData(i, qtspName)}</div>`;
}

function hiddenFields(consentId: string, csrfToken: string): Html {
  return html`<input type="hidden" name="consent_id" value="${consentId}">
<input type="hidden" name="csrf_token" value="${csrfToken}">`;
}

function consentForm(v: ConsentView): Html {
  return html`<form method="post" action="${CONSENT_PATH}" id="consent-form">
${hiddenFields(v.consentId, v.csrfToken)}
<fieldset id="identities"><legend>Log in as (sandbox test identity)</legend>
${v.identities.map((i) => identityOption(i, i.sub === v.selectedSub, v.qtsp.name))}</fieldset>
<fieldset id="second-factor"><legend>Second factor</legend>
<label for="otp">Confirmation code from your banking app</label>
<input type="text" name="otp" id="otp" inputmode="numeric" autocomplete="one-time-code" required>
<p class="hint" id="otp-hint">Sandbox: the code is always ${v.secondFactorHint}.</p></fieldset>
<button type="submit" name="action" value="consent" id="consent">Consent</button>
<button type="submit" name="action" value="cancel" id="cancel" formnovalidate>Cancel</button>
<button type="submit" name="action" value="select_bank" id="select-bank" formnovalidate>Select another bank</button>
</form>`;
}

export function consentTitle(v: PartiesView): string {
  return `${v.bankName}: confirm your signature`;
}

/** The page body: who asks, what is signed, which identity, the second factor, the three buttons. */
const IDENTITY_STYLE = new Html(
  '<style>.identity{border-top:1px solid #e1e6ec;padding:.5rem 0}.hint{color:#55606e;font-size:.9rem}</style>',
);

export function consentPage(v: ConsentView): Html {
  return html`${IDENTITY_STYLE}<h1>${consentTitle(v)}</h1>
<p class="hint">This is a sandbox bank: pick a test identity to log in as.</p>
${v.error === undefined ? '' : html`<p class="error" id="error" role="alert">${v.error}</p>`}
${partiesSection(v, v.purpose)}
${documentsSection(v.documents)}
${consentForm(v)}`;
}

export function insufficientTitle(v: PartiesView): string {
  return `${v.bankName}: signing not possible`;
}

/** Spec 7.3: the problem stated to the user, and that nothing is shared, before the error redirect. */
export function insufficientPage(v: InsufficientView): Html {
  const missing = (v.identity.insufficient?.missing ?? []).map(claimTitle).join(', ');
  return html`<h1>${insufficientTitle(v)}</h1>
<p id="problem">${v.bankName} does not hold all the data this signature needs for
<strong>${v.identity.displayName}</strong>${missing ? html`: <strong id="missing">${missing}</strong>` : ''}.</p>
<p id="nothing-shared">No data has been shared with ${rpName(v)} or with ${v.qtsp.name}. Nothing was signed.</p>
<form method="post" action="${CONSENT_PATH}" id="insufficient-form">
${hiddenFields(v.consentId, v.csrfToken)}
<button type="submit" name="action" value="acknowledge" id="continue">Return to ${rpName(v)}</button>
</form>`;
}

/** A request the bank will not act on (replayed, forged or expired form): nothing was issued. */
export function errorPage(message: string): Html {
  return html`<h1>This request cannot be completed</h1>
<p class="error" id="error">${message}</p>
<p>The bank did nothing with this form. If you have not finished, start again at the service you came from.</p>`;
}
