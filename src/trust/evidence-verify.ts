/**
 * `qtsp evidence verify TXN` (spec 4.7, 5.13): re-checks a stored introspection response years later, after
 * every key involved may have been rotated. The AS's key is taken from the long-term public key archive as it
 * stood at the response's iat (git history of our verified clone), the commit that held it is re-verified
 * against the operating party's OpenPGP key, and the JWT's RS256 signature is checked with that key. Then
 * the stored record is compared with what the bank signed: issuer, txn, sub, client, and every stored hash
 * among the consented documentDigests with the same hash algorithm.
 *
 * "The archive at iat": git timestamps have one-second resolution and the operating party's clock is not the
 * AS's, so every commit that was the archive's HEAD at some instant of [iat - skew, iat + skew] counts; the
 * one that was HEAD at iat itself is preferred. A key that left the archive before that window, or entered
 * it only after, does not vouch.
 */
import { decodeJwt, type JWTPayload } from 'jose';
import type * as openpgp from 'openpgp';
import type { SigningTransaction } from '../store/types.ts';
import {
  firstParentHistory,
  keySetAt,
  loadSignerKeys,
  resolveVerifiedHead,
  verifyCommitSignature,
  type ArchiveCommit,
} from './key-archive.ts';
import { rs256Header, signedWith, type HeaderFailure } from './jwt.ts';

export class EvidenceError extends Error {
  override name = 'EvidenceError';
}

export interface EvidenceArchive {
  /** our verified clone, <dataDir>/key-archive */
  readonly gitdir: string;
  /** the operating party's OpenPGP key(s) */
  readonly signerKeys: readonly openpgp.PublicKey[];
}

export interface VerifyEvidenceOptions {
  readonly archive: EvidenceArchive;
  /** our qtsp_id: the response must have been addressed to us (aud) */
  readonly qtspId: string;
  /** tolerance between the AS's iat and the archive's commit times (seconds) */
  readonly skewSeconds: number;
}

export interface KeyVouching {
  readonly commit: string;
  /** committer time of that commit, seconds since the epoch */
  readonly committedAt: number;
  /** OpenPGP key id of the operating party's key that signed the commit */
  readonly signerKeyId: string;
  /** whether the commit was the archive's HEAD in the second of iat (else: only within the clock tolerance) */
  readonly currentAtIat: boolean;
}

export interface VerifiedEvidence {
  readonly txn: string;
  readonly issuer: string;
  readonly sub: string;
  readonly clientId: string;
  readonly clientState: string | undefined;
  readonly kid: string;
  readonly iat: number;
  readonly exp: number | undefined;
  readonly hashAlgorithmOid: string;
  readonly hashes: readonly string[];
  readonly certificateSerialHex: string;
  readonly recordedAt: Date;
  readonly vouchedBy: KeyVouching;
}

function fail(message: string): never {
  throw new EvidenceError(message);
}

const STORED = 'the stored introspection response';

/** The header checks of jwt.ts, in this command's words. */
function headerRefused(failure: HeaderFailure, header?: { alg?: unknown }): EvidenceError {
  if (failure === 'alg') return new EvidenceError(`${STORED} is not RS256 (alg ${String(header?.alg)})`);
  if (failure === 'crit') return new EvidenceError(`${STORED} carries critical header parameters`);
  if (failure === 'kid') return new EvidenceError(`${STORED} names no kid`);
  return new EvidenceError(`${STORED} is not a decodable JWT`);
}

function decoded(jwt: string): { kid: string; claims: JWTPayload } {
  let claims;
  try {
    claims = decodeJwt(jwt);
  } catch {
    fail(`${STORED} is not a decodable JWT`);
  }
  const { kid } = rs256Header(jwt, headerRefused);
  if (typeof claims.iss !== 'string') fail(`${STORED} names no issuer`);
  if (typeof claims.iat !== 'number') fail(`${STORED} has no numeric iat`);
  return { kid, claims };
}

interface Candidate extends ArchiveCommit {
  /** HEAD during the second of `at` (whole seconds: a commit made in that same second may be either side) */
  readonly atIat: boolean;
}

/** The first-parent commits that were HEAD at some instant of [at - skew, at + skew], those HEAD at `at` first. */
async function commitsAround(gitdir: string, head: string, at: number, skew: number): Promise<Candidate[]> {
  const out: Candidate[] = [];
  let newerCommittedAt = Infinity; // the child on the first-parent line took over at this time
  for await (const c of firstParentHistory(gitdir, head)) {
    const headFrom = c.committedAt;
    const headUntil = newerCommittedAt;
    newerCommittedAt = c.committedAt;
    if (headFrom > at + skew) continue; // became HEAD after the window
    if (headUntil < at - skew) break; // replaced before the window; older commits even more so
    out.push({ ...c, atIat: headFrom <= at && headUntil >= at });
  }
  return [...out.filter((c) => c.atIat), ...out.filter((c) => !c.atIat)];
}

/** Where the key does appear in history, for a clear message when it does not vouch at iat. */
async function whereIsKey(gitdir: string, head: string, issuer: string, kid: string): Promise<string> {
  const seen: ArchiveCommit[] = [];
  for await (const c of firstParentHistory(gitdir, head))
    if ((await keySetAt(gitdir, c.oid, issuer))?.has(kid)) seen.push(c);
  if (seen.length === 0) return 'it is in no commit of the archive';
  const times = seen.map((c) => c.committedAt);
  return `it is in ${seen.length} commit(s) from ${iso(Math.min(...times))} to ${iso(Math.max(...times))}`;
}

const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

/** Finds the archived key that was valid at iat and checks the JWT's signature with it. */
async function vouch(
  jwt: string,
  issuer: string,
  kid: string,
  iat: number,
  o: VerifyEvidenceOptions,
): Promise<KeyVouching> {
  const { gitdir, signerKeys } = o.archive;
  const head = await resolveVerifiedHead(gitdir);
  if (!head) fail(`no verified key archive in ${gitdir}: the QTSP has never pulled it successfully`);
  const candidates = await commitsAround(gitdir, head, iat, o.skewSeconds);
  let held = false;
  for (const c of candidates) {
    const key = (await keySetAt(gitdir, c.oid, issuer))?.get(kid);
    if (!key) continue;
    held = true;
    if (!signedWith(jwt, key)) continue; // the header passed rs256Header in decoded()
    const check = await verifyCommitSignature(gitdir, c.oid, signerKeys);
    if (!check.ok) fail(`the archive commit that holds the key does not verify: ${check.reason}`);
    return { commit: c.oid, committedAt: c.committedAt, signerKeyId: check.signerKeyId, currentAtIat: c.atIat };
  }
  const atIat = `that the archive held at its iat ${iso(iat)}`;
  if (held) fail(`${STORED} does not verify with key ${kid} ${atIat}: the stored JWT was altered`);
  const where = await whereIsKey(gitdir, head, issuer, kid);
  fail(`the archive did not hold key ${kid} of ${issuer} at iat ${iso(iat)} (±${o.skewSeconds} s); ${where}`);
}

function signDetail(claims: JWTPayload): { hashAlgorithmOID?: unknown; documentDigests?: unknown } {
  const details = Array.isArray(claims['authorization_details']) ? (claims['authorization_details'] as unknown[]) : [];
  const signs = details.filter((d) => !!d && typeof d === 'object' && (d as { type?: unknown }).type === 'sign');
  if (signs.length !== 1) fail('the signed response holds no single authorization_details object of type sign');
  return signs[0] as { hashAlgorithmOID?: unknown; documentDigests?: unknown };
}

/** The stored record says what the bank signed (spec 5.9 checks, replayed on the evidence). */
function compare(t: SigningTransaction, claims: JWTPayload, qtspId: string): void {
  const same = (what: string, signed: unknown, stored: string) => {
    if (signed !== stored) fail(`the stored ${what} (${stored}) differs from the signed one (${String(signed)})`);
  };
  if (claims['active'] !== true) fail('the signed response does not say active: true');
  same('issuer', claims.iss, t.iss);
  same('txn', claims['txn'], t.txn);
  same('sub', claims.sub, t.sub);
  same('client_id', claims['client_id'], t.clientId);
  if (claims['client_state'] !== undefined) same('client_state', claims['client_state'], t.clientState);
  const aud = claims.aud;
  if (!(aud === qtspId || (Array.isArray(aud) && aud.includes(qtspId))))
    fail(`the signed response is not addressed to this QTSP (${qtspId})`);
  const detail = signDetail(claims);
  if (detail.hashAlgorithmOID !== t.hashAlgorithmOid)
    fail(
      `the stored hash algorithm ${t.hashAlgorithmOid} is not the consented one (${String(detail.hashAlgorithmOID)})`,
    );
  const consented = new Set(
    (Array.isArray(detail.documentDigests) ? detail.documentDigests : [])
      .map((d) => (d as { hash?: unknown } | null)?.hash)
      .filter((h): h is string => typeof h === 'string')
      .map((h) => Buffer.from(h, 'base64').toString('base64')),
  );
  t.hashes.forEach((h, i) => {
    if (!consented.has(Buffer.from(h, 'base64').toString('base64')))
      fail(`stored hash [${i}] ${h} is not among the documentDigests the user consented to`);
  });
}

/** Verifies one stored signing transaction; throws EvidenceError naming what does not hold. */
export async function verifyEvidence(t: SigningTransaction, options: VerifyEvidenceOptions): Promise<VerifiedEvidence> {
  const { kid, claims } = decoded(t.introspectionJwt);
  if (claims.iss !== t.iss) fail(`the stored issuer (${t.iss}) differs from the signed one (${String(claims.iss)})`);
  const vouchedBy = await vouch(t.introspectionJwt, t.iss, kid, claims.iat!, options);
  compare(t, claims, options.qtspId);
  return {
    txn: t.txn,
    issuer: t.iss,
    sub: t.sub,
    clientId: t.clientId,
    clientState: typeof claims['client_state'] === 'string' ? claims['client_state'] : undefined,
    kid,
    iat: claims.iat!,
    exp: claims.exp,
    hashAlgorithmOid: t.hashAlgorithmOid,
    hashes: t.hashes,
    certificateSerialHex: t.certificateSerialHex,
    recordedAt: t.createdAt,
    vouchedBy,
  };
}

export function formatVerifiedEvidence(v: VerifiedEvidence): string {
  const c = v.vouchedBy;
  const when = c.currentAtIat ? '(the archive HEAD at iat)' : '(within the clock tolerance of iat)';
  return [
    `evidence for txn ${v.txn} verifies:`,
    `  the bank ${v.issuer} signed this introspection response at ${iso(v.iat)} (RS256, kid ${v.kid})`,
    `  key vouched for by key archive commit ${c.commit} of ${iso(c.committedAt)} ${when},`,
    `    signed by the operating party's OpenPGP key ${c.signerKeyId}`,
    `  user (sub)          ${v.sub}`,
    `  relying party       ${v.clientId}${v.clientState ? ` (client_state ${v.clientState})` : ''}`,
    `  consented hashes    ${v.hashes.length} (${v.hashAlgorithmOid}), each among the signed documentDigests:`,
    ...v.hashes.map((h, i) => `    [${i}] ${h}`),
    `  signer certificate  serial ${v.certificateSerialHex}, recorded ${v.recordedAt.toISOString()}`,
    '',
  ].join('\n');
}

/**
 * `qtsp evidence verify` for the signings stored under one txn: prints what each proves, or why it does not
 * verify. Exit status 0 only when every one verifies. Reads the local verified clone (<dataDir>/key-archive)
 * as the QTSP last pulled it; nothing is fetched.
 */
export async function verifyStoredSignings(
  signings: readonly SigningTransaction[],
  config: {
    readonly dataDir: string;
    readonly qtspId: string;
    readonly trust: { readonly keyArchiveSignerKeyFile: string; readonly clockSkewSeconds: number };
  },
  out: { stdout: (text: string) => void; stderr: (text: string) => void },
): Promise<number> {
  const options: VerifyEvidenceOptions = {
    archive: {
      gitdir: `${config.dataDir}/key-archive`,
      signerKeys: await loadSignerKeys(config.trust.keyArchiveSignerKeyFile),
    },
    qtspId: config.qtspId,
    skewSeconds: config.trust.clockSkewSeconds,
  };
  let failed = 0;
  for (const [i, t] of signings.entries()) {
    const which = signings.length > 1 ? ` (signing ${i + 1} of ${signings.length})` : '';
    try {
      out.stdout(
        formatVerifiedEvidence(await verifyEvidence(t, options)).replace(
          /^evidence for txn (\S+) verifies:/,
          `evidence for txn $1${which} verifies:`,
        ),
      );
    } catch (err) {
      if (!(err instanceof EvidenceError)) throw err;
      failed++;
      out.stderr(`evidence for txn ${t.txn}${which} does NOT verify: ${err.message}\n`);
    }
  }
  return failed === 0 ? 0 : 1;
}
