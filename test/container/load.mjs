// Load for the kill test, run in a qtsp image on the host's network (as a relying party on the host): one
// consent for N documents, then signDoc for each, C at a time, through the address the service configuration
// names (HAProxy). One JSON line per answer on stdout: {status, txn, serial} (the signing certificate's serial
// from the CMS) or {error}; the test reads them.
// usage: node load.mjs ENDPOINTS_JSON N C
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as pkijs from 'pkijs';
import { authorizeSigning, callSignDoc, signDocRequest } from '/app/dist/rp/flow.js';

const [file, n, c] = process.argv.slice(2);
const endpoints = JSON.parse(readFileSync(file, 'utf8'));
const total = Number(n);
const SHA256 = '2.16.840.1.101.3.4.2.1';

/** the serial number (hex) of the certificate that made the first signature of a CMS */
function signerSerial(b64) {
  const content = pkijs.ContentInfo.fromBER(Buffer.from(b64, 'base64'));
  const sid = new pkijs.SignedData({ schema: content.content }).signerInfos[0].sid;
  return Buffer.from(sid.serialNumber.valueBlock.valueHexView).toString('hex');
}
const hashes = Array.from({ length: total }, (_, i) =>
  createHash('sha256').update(`container load ${process.pid} ${i}`).digest('base64'),
);
const auth = await authorizeSigning(endpoints, {
  documentDigests: hashes.map((hash, i) => ({ hash, label: `load ${i}` })),
  hashAlgorithmOID: SHA256,
});
process.stdout.write(`${JSON.stringify({ signDoc: auth.qtsp.signDoc })}\n`);
let next = 0;
async function runner() {
  while (next < total) {
    const i = next++;
    const body = signDocRequest(auth, {
      hashes: [hashes[i]],
      hashAlgorithmOID: SHA256,
      format: 'C',
      level: 'AdES-B-B',
    });
    try {
      const res = await callSignDoc(auth.qtsp.signDoc, endpoints, body, { timeoutMs: 60_000 });
      const so = res.body?.SignatureObject;
      const serial = so ? signerSerial(so[0]) : null;
      process.stdout.write(
        `${JSON.stringify({ status: res.status, txn: res.headers['x-transaction-id'] ?? null, serial })}\n`,
      );
    } catch (err) {
      process.stdout.write(`${JSON.stringify({ error: err.message })}\n`);
    }
  }
}
await Promise.all(Array.from({ length: Number(c) }, runner));
