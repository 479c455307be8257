/**
 * Independent oracles for B-T..B-LTA signatures and our trust services: OpenSSL parses the structures
 * (`openssl asn1parse` locates every part by offset; nothing here reuses src/ades/der.ts) and OpenSSL
 * verifies them (`openssl ts -verify`, `openssl ocsp -respin`, `openssl crl`; CMS: openssl.ts);
 * pdfsig's NSS trust store is made here too (`nssTrustStore`).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { pkiPaths } from '../../src/ca/material.ts';
import type { HashAlgorithm } from '../../src/crypto/algorithms.ts';
import { inScratch, run, type Scratch, type ToolResult, tsVerifyArgs } from './openssl.ts';

/**
 * A new NSS database at dir (for `pdfsig -nssdir sql:<dir>`) that trusts rootCertFile and nothing else:
 * certutil makes it with an empty password and adds the root as a trusted CA. Returns dir.
 */
export async function nssTrustStore(dir: string, rootCertFile: string): Promise<string> {
  mkdirSync(dir);
  for (const args of [
    ['-N', '--empty-password'],
    ['-A', '-n', 'root', '-t', 'CT,C,C', '-i', rootCertFile],
  ]) {
    const r = await run('certutil', [...args, '-d', `sql:${dir}`]);
    assert.ok(r.ok, r.output);
  }
  return dir;
}

/** Our PKI's certificate files (PEM) for OpenSSL's -CAfile, -issuer, -untrusted. */
export interface PkiFiles {
  readonly root: string;
  readonly issuing: string;
  readonly tsa: string;
  /** the root and the issuing CA in one file, written into the scratch directory */
  readonly rootAndIssuing: string;
}

export function pkiFiles(dataDir: string, work: Scratch): PkiFiles {
  const p = pkiPaths(dataDir);
  return {
    root: p.rootCert,
    issuing: p.issuingCert,
    tsa: p.tsaCert,
    rootAndIssuing: work.file(
      'root-and-issuing.pem',
      readFileSync(p.rootCert, 'utf8') + readFileSync(p.issuingCert, 'utf8'),
    ),
  };
}

export interface Asn1Node {
  readonly offset: number;
  readonly depth: number;
  readonly headerLength: number;
  readonly length: number;
  readonly constructed: boolean;
  /** what OpenSSL prints after cons:/prim:, e.g. "SEQUENCE", "OBJECT            :pkcs7-data", "cont [ 1 ]" */
  readonly text: string;
}

const LINE = /^\s*(\d+):d=\s*(\d+)\s+hl=\s*(\d+)\s+l=\s*(\d+)\s+(prim|cons):\s*(.*)$/;

/** The nodes of a DER structure as `openssl asn1parse -i` sees them, in order. */
export async function asn1parse(der: Uint8Array): Promise<Asn1Node[]> {
  return inScratch(async (s) => {
    const res = await run('openssl', ['asn1parse', '-inform', 'DER', '-i', '-in', s.file('x.der', der)]);
    if (!res.ok) throw new Error(`asn1parse: ${res.output}`);
    return res.output
      .split('\n')
      .map((l) => LINE.exec(l))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => ({
        offset: +m[1]!,
        depth: +m[2]!,
        headerLength: +m[3]!,
        length: +m[4]!,
        constructed: m[5] === 'cons',
        text: m[6]!.trim(),
      }));
  });
}

export const bytesOf = (der: Uint8Array, n: Asn1Node) =>
  Buffer.from(der.subarray(n.offset, n.offset + n.headerLength + n.length));
const end = (n: Asn1Node) => n.offset + n.headerLength + n.length;

/** The direct children of `parent` among `nodes`. */
export function childrenOf(nodes: readonly Asn1Node[], parent: Asn1Node): Asn1Node[] {
  return nodes.filter((n) => n.depth === parent.depth + 1 && n.offset > parent.offset && n.offset < end(parent));
}

/**
 * The parts of a detached CMS SignedData with one signer, located by OpenSSL's parse:
 * ContentInfo(d0) > [0](d1) > SignedData(d2) > version, digestAlgorithms, encapContentInfo, certificates [0],
 * crls [1], signerInfos (d3) > SignerInfo (d4) > fields (d5).
 */
export interface CmsParts {
  readonly nodes: Asn1Node[];
  readonly version: number;
  readonly eContentType: Buffer;
  readonly certificates: Buffer[];
  /** RevocationInfoChoice TLVs */
  readonly crls: Buffer[];
  /** SignerInfo version .. signature TLVs */
  readonly signerInfoFields: Buffer[];
  readonly signatureValue: Buffer;
  /** unsigned attributes: OID TLV and value TLVs */
  readonly unsigned: { oid: Buffer; name: string; values: Buffer[] }[];
}

export async function cmsParts(der: Buffer): Promise<CmsParts> {
  const nodes = await asn1parse(der);
  const signedData = nodes.find((n) => n.depth === 2)!;
  const top = childrenOf(nodes, signedData);
  const versionNode = top[0]!;
  const version = Number.parseInt(/INTEGER\s*:([0-9A-F]+)/.exec(versionNode.text)![1]!, 16);
  const encap = top[2]!;
  const certsNode = top.find((n) => n.text === 'cont [ 0 ]');
  const crlsNode = top.find((n) => n.text === 'cont [ 1 ]');
  const signerInfo = childrenOf(nodes, top[top.length - 1]!)[0]!;
  const fields = childrenOf(nodes, signerInfo);
  const unsignedNode = fields.find((f) => f.text === 'cont [ 1 ]');
  const signed = fields.filter((f) => f !== unsignedNode);
  const signatureNode = signed[signed.length - 1]!;
  const unsigned = unsignedNode
    ? childrenOf(nodes, unsignedNode).map((attr) => {
        const [oidNode, setNode] = childrenOf(nodes, attr);
        return {
          oid: bytesOf(der, oidNode!),
          name: oidNode!.text.replace(/^OBJECT\s*:/, ''),
          values: childrenOf(nodes, setNode!).map((v) => bytesOf(der, v)),
        };
      })
    : [];
  return {
    nodes,
    version,
    eContentType: bytesOf(der, childrenOf(nodes, encap)[0]!),
    certificates: certsNode ? childrenOf(nodes, certsNode).map((c) => bytesOf(der, c)) : [],
    crls: crlsNode ? childrenOf(nodes, crlsNode).map((c) => bytesOf(der, c)) : [],
    signerInfoFields: signed.map((f) => bytesOf(der, f)),
    signatureValue: Buffer.from(der.subarray(signatureNode.offset + signatureNode.headerLength, end(signatureNode))),
    unsigned,
  };
}

/** OpenSSL's names for the unsigned attributes (it does not know the ETSI ones and prints the OID) */
export const ATTR = {
  signatureTimeStamp: 'id-smime-aa-timeStampToken',
  archiveTimeStampV3: '0.4.0.1733.2.4',
  atsHashIndexV3: '0.4.0.19122.1.5',
} as const;

/** The OCSPResponse inside a RevocationInfoChoice other [1] { id-ri-ocsp-response, OCSPResponse } */
export async function ocspOfRevocationChoice(choice: Buffer): Promise<Buffer | undefined> {
  if (choice[0] !== 0xa1) return undefined;
  const nodes = await asn1parse(choice);
  const [oidNode, value] = childrenOf(nodes, nodes[0]!);
  if (!oidNode?.text.includes('1.3.6.1.5.5.7.16.2'))
    throw new Error(`unexpected other revocation format ${oidNode?.text}`);
  return bytesOf(choice, value!);
}

// ---------------------------------------------------------------------------------------------------------
// OpenSSL verification

/** openssl ts -verify of a TimeStampToken over `data` (or over a precomputed digest, hex). */
export async function verifyToken(
  token: Buffer,
  over: { data: Buffer } | { digestHex: string },
  caFile: string,
  untrusted?: string,
): Promise<ToolResult> {
  return inScratch(async (s) => {
    const subject = 'data' in over ? { dataFile: s.file('data', over.data) } : over;
    return await run('openssl', tsVerifyArgs(s.file('token.der', token), subject, caFile, untrusted));
  });
}

/**
 * openssl ocsp -respin: signature, responder chain and the status of `certFile`, looked up as OpenSSL does by
 * default: with a SHA-1 CertID (no -sha256; the RFC 5019 profile). `openssl ocsp -respin F -issuer CA -cert
 * SIGNER -CAfile ROOT`, nothing else but -no_nonce (an embedded response answers no request of ours).
 */
export async function verifyOcsp(
  response: Buffer,
  files: { root: string; issuing: string; cert: string },
): Promise<ToolResult> {
  return inScratch(async (s) => {
    return await run('openssl', [
      'ocsp',
      '-respin',
      s.file('resp.der', response),
      '-issuer',
      files.issuing,
      '-cert',
      files.cert,
      '-CAfile',
      files.root,
      '-no_nonce',
    ]);
  });
}

/** OpenSSL's printed dates ("Nov 23 01:40:12 2026 GMT", fractions kept) as a Date */
function opensslDate(text: string | undefined, what: string): Date {
  const date = new Date(text ?? '');
  if (Number.isNaN(date.getTime())) throw new Error(`${what}: no date in OpenSSL's output (${text})`);
  return date;
}

/** producedAt and the thisUpdate of every SingleResponse, as `openssl ocsp -resp_text` prints them */
export async function ocspTimes(response: Buffer): Promise<{ producedAt: Date; thisUpdates: Date[] }> {
  return inScratch(async (s) => {
    const r = await run('openssl', ['ocsp', '-respin', s.file('resp.der', response), '-resp_text', '-noverify']);
    if (!r.ok) throw new Error(`openssl ocsp -resp_text: ${r.output}`);
    return {
      producedAt: opensslDate(/Produced At: (.*)/.exec(r.output)?.[1], 'Produced At'),
      thisUpdates: [...r.output.matchAll(/This Update: (.*)/g)].map((m) => opensslDate(m[1], 'This Update')),
    };
  });
}

/** thisUpdate of a CRL, as `openssl crl -lastupdate` prints it */
export async function crlThisUpdate(crl: Buffer): Promise<Date> {
  return inScratch(async (s) => {
    const r = await run('openssl', ['crl', '-inform', 'DER', '-in', s.file('crl.der', crl), '-noout', '-lastupdate']);
    if (!r.ok) throw new Error(`openssl crl -lastupdate: ${r.output}`);
    return opensslDate(/lastUpdate=(.*)/.exec(r.output)?.[1], 'lastUpdate');
  });
}

/** genTime of a TimeStampToken, as `openssl ts -reply -token_in -text` prints it */
export async function tokenGenTime(token: Buffer): Promise<Date> {
  return inScratch(async (s) => {
    const r = await run('openssl', [
      'ts',
      '-reply',
      '-token_in',
      '-in',
      s.file('token.der', token),
      '-token_out',
      '-text',
    ]);
    if (!r.ok) throw new Error(`openssl ts -text: ${r.output}`);
    return opensslDate(/Time stamp: (.*)/.exec(r.output)?.[1], 'Time stamp');
  });
}

/**
 * Every piece of revocation data was issued strictly after `genTime` (EU DSS's fresh
 * revocation data): OCSP producedAt and every thisUpdate, CRL thisUpdate; read by OpenSSL. Returns how many
 * pieces were checked.
 */
export async function assertIssuedAfter(
  revocation: { ocsp: readonly Buffer[]; crl: readonly Buffer[] },
  genTime: Date,
  what: string,
): Promise<number> {
  for (const response of revocation.ocsp) {
    const { producedAt, thisUpdates } = await ocspTimes(response);
    if (!(producedAt > genTime))
      throw new Error(
        `${what}: OCSP producedAt ${producedAt.toISOString()} is not after genTime ${genTime.toISOString()}`,
      );
    if (thisUpdates.length === 0) throw new Error(`${what}: OCSP response without thisUpdate`);
    for (const t of thisUpdates)
      if (!(t > genTime))
        throw new Error(`${what}: OCSP thisUpdate ${t.toISOString()} is not after genTime ${genTime.toISOString()}`);
  }
  for (const crl of revocation.crl) {
    const thisUpdate = await crlThisUpdate(crl);
    if (!(thisUpdate > genTime))
      throw new Error(
        `${what}: CRL thisUpdate ${thisUpdate.toISOString()} is not after genTime ${genTime.toISOString()}`,
      );
  }
  return revocation.ocsp.length + revocation.crl.length;
}

/** openssl crl -CAfile: the CRL's signature against the CAs in caFile */
export async function verifyCrl(crl: Buffer, caFile: string): Promise<ToolResult> {
  return inScratch(async (s) => {
    return await run('openssl', [
      'crl',
      '-inform',
      'DER',
      '-in',
      s.file('crl.der', crl),
      '-CAfile',
      caFile,
      '-noout',
      '-text',
    ]);
  });
}

/** a copy with one byte flipped at `at` (negative: from the end) */
export function tamper(der: Buffer, at: number): Buffer {
  const copy = Buffer.from(der);
  const i = at < 0 ? copy.length + at : at;
  copy[i] = copy[i]! ^ 0x01;
  return copy;
}

export const sha = (alg: string, data: Uint8Array) => createHash(alg).update(data).digest();
export const readPem = (file: string) => readFileSync(file, 'utf8');

/**
 * The archive-time-stamp-v3 imprint input (EN 319 122-1 5.5.3), recomputed from OpenSSL's parse: eContentType,
 * the document hash, the SignerInfo fields before unsignedAttrs, and the ATSHashIndexV3, whose three lists are
 * first checked against the hashes of what the SignedData holds (5.5.2).
 */
export async function archiveImprint(
  parts: CmsParts,
  atsToken: Buffer,
  docHash: Buffer,
  alg: HashAlgorithm,
): Promise<Buffer> {
  const tokenNodes = await asn1parse(atsToken);
  const attrOid = tokenNodes.find((n) => n.text.endsWith(ATTR.atsHashIndexV3));
  assert.ok(attrOid, 'the archive time-stamp token carries no ats-hash-index-v3');
  const attrSeq = tokenNodes.filter((n) => n.depth === attrOid.depth - 1 && n.offset < attrOid.offset).pop()!;
  const valueSet = childrenOf(tokenNodes, attrSeq)[1]!;
  const indexNode = childrenOf(tokenNodes, valueSet)[0]!;
  const hashIndex = bytesOf(atsToken, indexNode);
  const [algNode, certsNode, crlsNode, attrsNode] = childrenOf(tokenNodes, indexNode);
  const algText = childrenOf(tokenNodes, algNode!)[0]!.text;
  assert.ok(
    algText.endsWith(`:${alg.node}`) || algText.endsWith(alg.oid),
    `hashIndAlgorithm ${algText}, expected ${alg.name}`,
  );
  const listed = (n: typeof certsNode) =>
    childrenOf(tokenNodes, n!).map((o) => bytesOf(atsToken, o).subarray(2).toString('hex'));
  const hex = (b: Buffer) => sha(alg.node, b).toString('hex');
  assert.deepEqual(listed(certsNode), parts.certificates.map(hex), 'certificatesHashIndex');
  assert.deepEqual(listed(crlsNode), parts.crls.map(hex), 'crlsHashIndex');
  const sigTs = parts.unsigned.find((a) => a.name === ATTR.signatureTimeStamp)!;
  assert.deepEqual(
    listed(attrsNode),
    sigTs.values.map((v) => hex(Buffer.concat([sigTs.oid, v]))),
    'unsignedAttrValuesHashIndex',
  );
  return Buffer.concat([parts.eContentType, docHash, ...parts.signerInfoFields, hashIndex]);
}
