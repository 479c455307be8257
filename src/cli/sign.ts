/**
 * `qtsp sign FILE...` / `qtsp sign --hash B64...`: the relying party's side of the flow (spec 1.2): hash the
 * files (or take the given hashes), PAR, authorization, token, signDoc; write one signature per document:
 * FILE.p7s (CAdES, a DER CMS) or FILE.xml (XAdES, an XML document); for given hashes hash-1.p7s, hash-2.p7s
 * ... in the order given. With --format P and files, the files are PDFs: sign-pdf.ts writes FILE.signed.pdf.
 * Prints each step as it happens and one summary line. Exit status 0 only when every document was signed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { digest, hashByName, HASH_ALGORITHMS, type HashAlgorithm } from '../crypto/algorithms.ts';
import { loadConfig } from '../config/load.ts';
import { rsaPssParams, type SignHash } from '../crypto/signature.ts';
import { authorizeSigning, callSignDoc, type RpEndpoints } from '../rp/flow.ts';
import { signPdfFiles } from './sign-pdf.ts';

const PROFILE = 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#';

export const SIGN_USAGE = `usage: qtsp sign FILE... [options]        sign files as a relying party (the sandbox's RP)
       qtsp sign --hash B64 [--hash B64]... [options]   sign given digests (test hashes) instead of files
options:
  --hash-alg sha-256|sha-384|sha-512|sha3-256|sha3-384|sha3-512   document hash algorithm (default sha-256)
  --format C|P|X         CAdES (FILE.p7s), PAdES (PDF files: FILE.signed.pdf), XAdES (FILE.xml); default C
  --level B-B|B-T|B-LT|B-LTA                                      conformance level (default B-B)
  --sign-algo ALG        signer key (signAlgo, spec 2.12): ecdsa-p256, ecdsa-p384, rsa, rsa-pss, or an OID
  --sign-algo-params B64 signAlgoParams (Base64 DER) with an OID; the names above set it themselves
  --hash B64             a digest (standard Base64) to sign instead of files; repeatable; writes
                         hash-1.p7s (or .xml) ... in the order given, into --out-dir (default .)
  --out-dir DIR          where signatures of --hash go
finding the sandbox:
  --data-dir DIR         the data directory of the running \`npm start\` / \`qtsp dev\` (default: QTSP_DATA_DIR,
                         else ./data); its sandbox/endpoints.json names the AS, the platform and our RP
  --endpoints FILE       that endpoints.json file itself (a sandbox elsewhere)
`;

/** Friendly names for signAlgo (offer.ts lists what the QTSP accepts); the key OIDs with their parameters. */
const EC_PUBLIC_KEY = '1.2.840.10045.2.1';
const NAMED_CURVE_P256 = 'BggqhkjOPQMBBw=='; // DER OBJECT IDENTIFIER 1.2.840.10045.3.1.7 (prime256v1)
const NAMED_CURVE_P384 = 'BgUrgQQAIg=='; // DER OBJECT IDENTIFIER 1.3.132.0.34 (secp384r1)
const RSA_ENCRYPTION = '1.2.840.113549.1.1.1';
const RSASSA_PSS = '1.2.840.113549.1.1.10';

function signAlgoOf(
  name: string | undefined,
  params: string | undefined,
  hash: HashAlgorithm,
): { signAlgo?: string; signAlgoParams?: string } | string {
  if (name === undefined) return params === undefined ? {} : '--sign-algo-params needs --sign-algo';
  const named: Record<string, { signAlgo: string; signAlgoParams?: string }> = {
    'ecdsa-p256': { signAlgo: EC_PUBLIC_KEY, signAlgoParams: NAMED_CURVE_P256 },
    'ecdsa-p384': { signAlgo: EC_PUBLIC_KEY, signAlgoParams: NAMED_CURVE_P384 },
    rsa: { signAlgo: RSA_ENCRYPTION },
    'rsa-pss': { signAlgo: RSASSA_PSS, signAlgoParams: rsaPssParams(hash.node as SignHash).toString('base64') },
  };
  const known = named[name.toLowerCase()];
  if (known)
    return params === undefined
      ? known
      : `--sign-algo ${name} sets signAlgoParams itself; give --sign-algo-params only with an OID`;
  if (/^[0-2](\.(0|[1-9][0-9]*))+$/.test(name))
    return { signAlgo: name, ...(params !== undefined ? { signAlgoParams: params } : {}) };
  return `unknown --sign-algo ${name}; use ecdsa-p256, ecdsa-p384, rsa, rsa-pss or an OID`;
}

/** A --hash value: standard Base64 of exactly one digest of the chosen algorithm. */
function checkHash(b64: string, hash: HashAlgorithm): string | undefined {
  const bytes = Buffer.from(b64, 'base64');
  if (bytes.toString('base64') !== b64) return `--hash ${b64} is not standard Base64 (RFC 4648 section 4)`;
  if (bytes.length !== hash.length)
    return `--hash ${b64} has ${bytes.length} bytes; a ${hash.name} digest has ${hash.length}`;
  return undefined;
}

function fail(message: string): number {
  process.stderr.write(`${message}\n`);
  return 2;
}

export async function runSign(args: string[]): Promise<number> {
  const { positionals: files, values } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      'hash-alg': { type: 'string', default: 'sha-256' },
      format: { type: 'string', default: 'C' },
      level: { type: 'string', default: 'AdES-B-B' },
      'sign-algo': { type: 'string' },
      'sign-algo-params': { type: 'string' },
      hash: { type: 'string', multiple: true },
      'out-dir': { type: 'string', default: '.' },
      'data-dir': { type: 'string' },
      endpoints: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(SIGN_USAGE);
    return 0;
  }
  const given = values.hash ?? [];
  if ((files.length === 0) === (given.length === 0))
    return fail(`${files.length ? 'give files or --hash, not both' : 'nothing to sign'}\n${SIGN_USAGE}`);
  const hash = hashByName(values['hash-alg']);
  if (!hash)
    return fail(
      `unknown --hash-alg ${values['hash-alg']}; use one of ${[...HASH_ALGORITHMS.values()].map((h) => h.name.toLowerCase()).join(', ')}`,
    );
  if (!['C', 'P', 'X'].includes(values.format))
    return fail(`unknown --format ${values.format}; use C (CAdES), P (PAdES) or X (XAdES)`);
  const algo = signAlgoOf(values['sign-algo'], values['sign-algo-params'], hash);
  if (typeof algo === 'string') return fail(algo);
  const badHash = given.map((h) => checkHash(h, hash)).find((m) => m !== undefined);
  if (badHash) return fail(badHash);

  const dataDir = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {}).dataDir;
  const endpointsFile = values.endpoints ?? join(dataDir, 'sandbox', 'endpoints.json');
  let endpoints: RpEndpoints;
  try {
    endpoints = JSON.parse(readFileSync(endpointsFile, 'utf8')) as RpEndpoints;
  } catch {
    return fail(
      `no sandbox found: cannot read ${endpointsFile}. Start one (npm start) and pass its data directory with --data-dir DIR or QTSP_DATA_DIR`,
    );
  }
  const step = (msg: string) => process.stdout.write(`  ${msg}\n`);
  const level = values.level.startsWith('AdES-') ? values.level : `AdES-${values.level}`; // B-LT as AdES-B-LT
  if (values.format === 'P' && files.length) return signPdfFiles(files, level, hash, endpoints, step, algo);

  const documents = files.length
    ? files.map((f) => ({ hash: digest(hash, readFileSync(f)).toString('base64'), label: basename(f), base: f }))
    : given.map((h, i) => ({ hash: h, label: `hash-${i + 1}`, base: join(values['out-dir'], `hash-${i + 1}`) }));
  step(
    files.length ? `hashed ${files.length} file(s) with ${hash.name}` : `${given.length} given ${hash.name} hash(es)`,
  );
  const hashes = documents.map((d) => d.hash);
  const auth = await authorizeSigning(endpoints, {
    documentDigests: documents.map((d) => ({ hash: d.hash, label: d.label })),
    hashAlgorithmOID: hash.oid,
    onStep: step,
  });
  const res = await callSignDoc(auth.qtsp.signDoc, endpoints, {
    SAD: auth.accessToken,
    credentialID: 'qes_eidas',
    documentDigests: { hashes, hashAlgorithmOID: hash.oid },
    profile: PROFILE,
    signature_format: values.format,
    conformance_level: level,
    ...algo,
  });
  const body = res.body as { SignatureObject?: unknown; error?: string; error_description?: string };
  if (res.status !== 200 || !Array.isArray(body.SignatureObject) || body.SignatureObject.length !== documents.length) {
    process.stderr.write(`signDoc failed: HTTP ${res.status} ${body.error ?? ''} ${body.error_description ?? ''}\n`);
    return 1;
  }
  step(`signDoc: ${documents.length} signature(s) received`);
  // X: the SignatureObject is the UTF-8 bytes of an XML document (openapi.yaml); C and P: a DER CMS
  const extension = values.format === 'X' ? '.xml' : '.p7s';
  const outputs = documents.map((d, i) => {
    const out = `${d.base}${extension}`;
    writeFileSync(out, Buffer.from((body.SignatureObject as string[])[i]!, 'base64'));
    return out;
  });
  const txn = String(res.headers['x-transaction-id'] ?? 'unknown');
  process.stdout.write(
    `signed ${outputs.length} ${files.length ? 'file(s)' : 'hash(es)'}: ${outputs.join(', ')} (txn ${txn})\n`,
  );
  return 0;
}
