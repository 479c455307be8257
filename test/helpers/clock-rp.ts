/**
 * The relying party on a moved clock (test/helpers/moved-clock.ts clockRp): one signDoc call, or one PAdES
 * signing, from a process on that clock, so that it accepts the TLS certificates the sandbox renewed there.
 * argv[2] is the request as JSON; prints RP_RESULT and the result as JSON.
 */
import { createHash } from 'node:crypto';
import { SHA256 } from '../../src/crypto/algorithms.ts';
import { authorizeSigning, callSignDoc, signDocRequest, type RpEndpoints } from '../../src/rp/flow.ts';

interface RpRequest {
  readonly endpoints: RpEndpoints;
  readonly signDocUrl: string;
  /** base64: the document (CAdES, XAdES), or the PDF */
  readonly document: string;
  readonly format: 'C' | 'X' | 'P';
  readonly level: string;
}

const SHA256_OID = SHA256.oid;
const r = JSON.parse(process.argv[2] ?? '{}') as RpRequest;
const document = Buffer.from(r.document, 'base64');
let result: unknown;
if (r.format === 'P') {
  // the PDF modules only for a PDF: most calls sign CAdES or XAdES, each in a process of its own
  const { signPdfs } = await import('../../src/rp/pades.ts');
  const signed = await signPdfs(r.endpoints, {
    pdfs: [document],
    labels: ['document.pdf'],
    level: r.level as 'AdES-B-LT',
    hashAlgorithm: SHA256,
  });
  result = { pdf: Buffer.from(signed.pdfs[0]!).toString('base64') };
} else {
  const hash = createHash('sha256').update(document).digest('base64');
  const auth = await authorizeSigning(r.endpoints, {
    documentDigests: [{ hash, label: 'document' }],
    hashAlgorithmOID: SHA256_OID,
  });
  const res = await callSignDoc(
    r.signDocUrl,
    r.endpoints,
    signDocRequest(auth, { hashes: [hash], hashAlgorithmOID: SHA256_OID, format: r.format, level: r.level }),
  );
  result = { status: res.status, body: res.body };
}
process.stdout.write(`RP_RESULT ${JSON.stringify(result)}\n`);
