/**
 * The demo RP's verdicts: what the tools say of a bad signature, and a clear verdict when a tool is missing.
 * The passing verdicts are in test/integration/demo-rp.test.ts, against real signatures.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { verifyCades, verifyPades, verifyXades } from '../../../../src/rp/demo/verify.ts';

const files = { rootCaFile: '/nonexistent/root.pem', issuingCaFile: '/nonexistent/issuing.pem' };
const doc = Buffer.from('document');

describe('demo RP verification', () => {
  it('CAdES: garbage fails, with openssl output and the command line without temp paths', async () => {
    const v = await verifyCades(Buffer.from('not a CMS'), doc, files);
    assert.equal(v.passed, false);
    assert.equal(v.checks.length, 1);
    assert.equal(v.checks[0]!.passed, false);
    assert.match(
      v.checks[0]!.command,
      /^openssl cms -verify -cades -binary -inform DER -in signature\.p7s -content document /,
    );
    assert.ok(v.checks[0]!.output.length > 0);
  });

  it('XAdES: garbage fails', async () => {
    const v = await verifyXades(Buffer.from('<not-a-signature/>'), doc, files);
    assert.equal(v.passed, false);
    assert.match(v.checks[0]!.command, /^xmlsec1 --verify/);
  });

  it('PAdES: a PDF without signatures fails', async () => {
    const v = await verifyPades(Buffer.from('%PDF-1.4\n%%EOF\n'), files);
    assert.equal(v.passed, false);
  });

  it('PAdES: signature dictionaries that cannot be read are a failed check of their own', async () => {
    const pdf = Buffer.from(
      '%PDF-1.4\n<< /Type /DocTimeStamp /SubFilter /ETSI.RFC3161 /ByteRange [0 5 9 3] >>\n%%EOF\n',
    );
    const v = await verifyPades(pdf, files);
    assert.equal(v.passed, false);
    const read = v.checks.find((c) => /signature dictionaries/.test(c.name));
    assert.equal(read?.passed, false);
    assert.match(read?.output ?? '', /does not frame a hex string/);
  });

  it('a missing tool: FAILED, naming the Debian package to install', async () => {
    const path = process.env['PATH'];
    process.env['PATH'] = '/nonexistent';
    try {
      const v = await verifyXades(Buffer.from('<x/>'), doc, files);
      assert.equal(v.passed, false);
      assert.match(v.checks[0]!.output, /xmlsec1 is not installed \(Debian package xmlsec1\)/);
    } finally {
      process.env['PATH'] = path;
    }
  });
});
