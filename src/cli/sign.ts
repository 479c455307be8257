/**
 * `qtsp sign FILE...`: the relying party's side of the flow (spec 1.2): hash the files, PAR, authorization,
 * token, signDoc; write FILE.p7s next to each file. With --format P the files are PDFs: sign-pdf.ts writes
 * FILE.signed.pdf (PAdES). Prints each step as it happens and one summary line.
 * Exit status 0 only when every file was signed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { digest, hashByName } from '../ades/algorithms.ts';
import { loadConfig } from '../config/load.ts';
import { authorizeSigning, callSignDoc, type RpEndpoints } from '../rp/flow.ts';
import { signPdfFiles } from './sign-pdf.ts';

const PROFILE = 'http://uri.etsi.org/19432/v1.1.1#/creationprofile#';

export async function runSign(args: string[]): Promise<number> {
  const { positionals: files, values } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      'hash-alg': { type: 'string', default: 'sha-256' },
      format: { type: 'string', default: 'C' },
      level: { type: 'string', default: 'AdES-B-B' },
      'data-dir': { type: 'string' },
      endpoints: { type: 'string' },
    },
  });
  if (files.length === 0) {
    process.stderr.write('usage: qtsp sign FILE... [--hash-alg sha-256] [--format C] [--level AdES-B-B] [--endpoints FILE]\n');
    return 2;
  }
  const hash = hashByName(values['hash-alg']);
  if (!hash) {
    process.stderr.write(`unknown --hash-alg ${values['hash-alg']}; use one of sha-256, sha-384, sha-512, sha3-256, sha3-384, sha3-512\n`);
    return 2;
  }
  const dataDir = loadConfig(values['data-dir'] ? { dataDir: values['data-dir'] } : {}).dataDir;
  const endpointsFile = values.endpoints ?? join(dataDir, 'sandbox', 'endpoints.json');
  const endpoints = JSON.parse(readFileSync(endpointsFile, 'utf8')) as RpEndpoints;
  const step = (msg: string) => process.stdout.write(`  ${msg}\n`);
  const level = values.level.startsWith('AdES-') ? values.level : `AdES-${values.level}`; // B-LT as AdES-B-LT
  if (values.format === 'P') return signPdfFiles(files, level, hash, endpoints, step);

  const hashes = files.map((f) => digest(hash, readFileSync(f)).toString('base64'));
  step(`hashed ${files.length} file(s) with ${hash.name}`);
  const auth = await authorizeSigning(endpoints, {
    documentDigests: files.map((f, i) => ({ hash: hashes[i]!, label: basename(f) })),
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
  });
  const body = res.body as { SignatureObject?: unknown; error?: string; error_description?: string };
  if (res.status !== 200 || !Array.isArray(body.SignatureObject) || body.SignatureObject.length !== files.length) {
    process.stderr.write(`signDoc failed: HTTP ${res.status} ${body.error ?? ''} ${body.error_description ?? ''}\n`);
    return 1;
  }
  step(`signDoc: ${files.length} signature(s) received`);
  const outputs = files.map((f, i) => {
    const out = `${f}.p7s`;
    writeFileSync(out, Buffer.from((body.SignatureObject as string[])[i]!, 'base64'));
    return out;
  });
  const txn = String(res.headers['x-transaction-id'] ?? 'unknown');
  process.stdout.write(`signed ${outputs.length} file(s): ${outputs.join(', ')} (txn ${txn})\n`);
  return 0;
}
