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

type SignAlgo = { signAlgo?: string; signAlgoParams?: string };

function signAlgoOf(name: string | undefined, params: string | undefined, hash: HashAlgorithm): SignAlgo | string {
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

const SIGN_OPTIONS = {
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
} as const;

type SignValues = ReturnType<typeof parseSignArgs>['values'];
function parseSignArgs(args: string[]) {
  return parseArgs({ args, allowPositionals: true, options: SIGN_OPTIONS });
}

/** The checked options: the document hash algorithm, the signer key algorithm and the given hashes. */
interface SignChoices {
  readonly hash: HashAlgorithm;
  readonly algo: SignAlgo;
  readonly given: readonly string[];
}

/** The options checked against each other, or the message that says what is wrong. */
function checkOptions(files: readonly string[], values: SignValues): SignChoices | string {
  const given = values.hash ?? [];
  if ((files.length === 0) === (given.length === 0))
    return `${files.length ? 'give files or --hash, not both' : 'nothing to sign'}\n${SIGN_USAGE}`;
  const hash = hashByName(values['hash-alg']);
  if (!hash) {
    const names = [...HASH_ALGORITHMS.values()].map((h) => h.name.toLowerCase()).join(', ');
    return `unknown --hash-alg ${values['hash-alg']}; use one of ${names}`;
  }
  if (!['C', 'P', 'X'].includes(values.format))
    return `unknown --format ${values.format}; use C (CAdES), P (PAdES) or X (XAdES)`;
  const algo = signAlgoOf(values['sign-algo'], values['sign-algo-params'], hash);
  if (typeof algo === 'string') return algo;
  const badHash = given.map((h) => checkHash(h, hash)).find((m) => m !== undefined);
  if (badHash) return badHash;
  return { hash, algo, given };
}

/** The running sandbox's addresses (--endpoints, else its data directory's), or the message that none was found. */
function readEndpoints(values: SignValues): RpEndpoints | string {
  const dataDir = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {}).dataDir;
  const endpointsFile = values.endpoints ?? join(dataDir, 'sandbox', 'endpoints.json');
  try {
    return JSON.parse(readFileSync(endpointsFile, 'utf8')) as RpEndpoints;
  } catch {
    return (
      `no sandbox found: cannot read ${endpointsFile}. ` +
      'Start one (npm start) and pass its data directory with --data-dir DIR or QTSP_DATA_DIR'
    );
  }
}

/** One document to sign: its digest, its label at the AS, and its output path without the extension. */
interface SignDocument {
  readonly hash: string;
  readonly label: string;
  readonly base: string;
}

/** What one signDoc call signs and how. */
interface SignJob extends SignChoices {
  readonly files: readonly string[];
  readonly documents: readonly SignDocument[];
  readonly format: string;
  readonly level: string;
}

/** The files hashed, or the given hashes named hash-1, hash-2 ... in --out-dir. */
function documentsOf(files: readonly string[], choices: SignChoices, outDir: string): SignDocument[] {
  const { hash, given } = choices;
  return files.length
    ? files.map((f) => ({ hash: digest(hash, readFileSync(f)).toString('base64'), label: basename(f), base: f }))
    : given.map((h, i) => ({ hash: h, label: `hash-${i + 1}`, base: join(outDir, `hash-${i + 1}`) }));
}

/** PAR, authorization and token for the job's digests, then signDoc; the response as received. */
async function requestSignatures(job: SignJob, endpoints: RpEndpoints, step: (msg: string) => void) {
  const { documents, hash } = job;
  const auth = await authorizeSigning(endpoints, {
    documentDigests: documents.map((d) => ({ hash: d.hash, label: d.label })),
    hashAlgorithmOID: hash.oid,
    onStep: step,
  });
  return callSignDoc(auth.qtsp.signDoc, endpoints, {
    SAD: auth.accessToken,
    credentialID: 'qes_eidas',
    documentDigests: { hashes: documents.map((d) => d.hash), hashAlgorithmOID: hash.oid },
    profile: PROFILE,
    signature_format: job.format,
    conformance_level: job.level,
    ...job.algo,
  });
}

/** Each signature next to its document (or in --out-dir); the paths written, in order. */
function writeSignatures(job: SignJob, signatureObjects: readonly string[]): string[] {
  // X: the SignatureObject is the UTF-8 bytes of an XML document (openapi.yaml); C and P: a DER CMS
  const extension = job.format === 'X' ? '.xml' : '.p7s';
  return job.documents.map((d, i) => {
    const out = `${d.base}${extension}`;
    writeFileSync(out, Buffer.from(signatureObjects[i]!, 'base64'));
    return out;
  });
}

/** CAdES or XAdES of files or given hashes through the whole flow: 0 when every document was signed, else 1. */
async function signDocuments(job: SignJob, endpoints: RpEndpoints, step: (msg: string) => void): Promise<number> {
  const { files, documents, hash, given } = job;
  step(
    files.length ? `hashed ${files.length} file(s) with ${hash.name}` : `${given.length} given ${hash.name} hash(es)`,
  );
  const res = await requestSignatures(job, endpoints, step);
  const body = res.body as { SignatureObject?: unknown; error?: string; error_description?: string };
  if (res.status !== 200 || !Array.isArray(body.SignatureObject) || body.SignatureObject.length !== documents.length) {
    process.stderr.write(`signDoc failed: HTTP ${res.status} ${body.error ?? ''} ${body.error_description ?? ''}\n`);
    return 1;
  }
  step(`signDoc: ${documents.length} signature(s) received`);
  const outputs = writeSignatures(job, body.SignatureObject as string[]);
  const txn = String(res.headers['x-transaction-id'] ?? 'unknown');
  process.stdout.write(
    `signed ${outputs.length} ${files.length ? 'file(s)' : 'hash(es)'}: ${outputs.join(', ')} (txn ${txn})\n`,
  );
  return 0;
}

export async function runSign(args: string[]): Promise<number> {
  const { positionals: files, values } = parseSignArgs(args);
  if (values.help) {
    process.stdout.write(SIGN_USAGE);
    return 0;
  }
  const choices = checkOptions(files, values);
  if (typeof choices === 'string') return fail(choices);
  const endpoints = readEndpoints(values);
  if (typeof endpoints === 'string') return fail(endpoints);
  const step = (msg: string) => process.stdout.write(`  ${msg}\n`);
  const level = values.level.startsWith('AdES-') ? values.level : `AdES-${values.level}`; // B-LT as AdES-B-LT
  if (values.format === 'P' && files.length)
    return signPdfFiles(files, level, choices.hash, endpoints, step, choices.algo);
  const documents = documentsOf(files, choices, values['out-dir']);
  return signDocuments({ ...choices, files, documents, format: values.format, level }, endpoints, step);
}
