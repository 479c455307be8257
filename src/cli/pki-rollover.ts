/**
 * `qtsp pki ceremony --rollover-issuing-ca [--dry-run]` and `qtsp pki ceremony --destroy-issuing-ca TAG
 * [--dry-run]` (ca/rollover.ts): a new issuing CA at a key ceremony, and the destruction of a retired one's key
 * once nothing needs it. With the long-lived keys in a token, the token is opened as keys.provider names it.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadCeremonyRoot } from '../ca/init.ts';
import { generationTag, retiredGenerations } from '../ca/issuing-generations.ts';
import { keysInCustody, longLivedMaterial, pkiPaths } from '../ca/material.ts';
import { pkiUrls, publicBaseUrl } from '../ca/publication.ts';
import { destroyRetiredKey, RolloverRefused, rolloverIssuingCa } from '../ca/rollover.ts';
import type { KeyedCertificate } from '../ca/authority.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { loadCustodyBackend, requireKeysIn, sandboxKeys } from '../custody/registry.ts';
import { keyGenerationsOf, type KeyCustody, type KeyGenerations } from '../custody/types.ts';
import { CrlIssuer } from '../revocation/crl.ts';
import { openStore } from '../store/open.ts';
import type { CanonicalValue } from '../util/canonical-json.ts';

export type JournalCaEvent = (config: Config, kind: string, data: { [key: string]: CanonicalValue }) => Promise<void>;

const PICKED_UP = 'running instances pick it up without a restart (calendar.reloadCheckSeconds)';

/**
 * `work` with the custody's key generations when the long-lived keys are in a token (the sandbox's SoftHSM2
 * token of `qtsp dev` included), else with undefined (key files). The token is opened as for init, its keys
 * not looked up by label: a rollover or renewal that stopped between two relabellings left a role without its
 * current key, and its rerun finds each key itself.
 */
export async function withGenerations<T>(
  config: Config,
  work: (g: KeyGenerations | undefined) => Promise<T>,
): Promise<T> {
  if (!keysInCustody(config.dataDir)) return work(undefined);
  const keys = await sandboxKeys(config);
  const effective = keys ? loadConfig({ dataDir: config.dataDir, keys: { ...config.keys, ...keys } }) : config;
  const backend = await loadCustodyBackend(effective.keys.provider);
  const material = longLivedMaterial(config.dataDir);
  let custody: KeyCustody;
  if (backend.openForInit) {
    requireKeysIn(material, effective.keys.provider);
    custody = await backend.openForInit(effective, { material });
  } else custody = await backend.open(effective, { material });
  try {
    const generations = keyGenerationsOf(custody);
    if (!generations)
      throw new ConfigError(
        `setting keys.provider: the long-lived keys of ${config.dataDir} are in a key custody; ` +
          `${effective.keys.provider} keeps no generations of them (a rollover or renewal needs them)`,
      );
    return await work(generations);
  } finally {
    await custody.close();
  }
}

const describe = (file: string) => {
  const x = new X509Certificate(readFileSync(file));
  return `${x.subject.split('\n').join(', ')} (until ${new Date(x.validTo).toISOString()})`;
};

/** `--rollover-issuing-ca`: the plan, or the rollover with the root key of the ceremony directory. */
export async function rollover(
  config: Config,
  flags: { 'dry-run': boolean; 'ceremony-dir'?: string | undefined },
  journal: JournalCaEvent,
): Promise<number> {
  const p = pkiPaths(config.dataDir);
  const where = keysInCustody(config.dataDir) ? `in the key custody ${config.keys.provider}` : 'as key files';
  process.stdout.write(
    `issuing CA rollover: the current CA ${describe(p.issuingCert)} retires; a new CA key and its OCSP ` +
      `responder key are made ${where}, the root certifies the CA; the retired CA keeps answering OCSP and ` +
      'signing CRLs for the certificates it issued\n',
  );
  if (flags['dry-run']) return 0;
  const ceremonyDir = flags['ceremony-dir'];
  const root = loadCeremonyRoot({ dataDir: config.dataDir, ...(ceremonyDir ? { ceremonyDir } : {}) });
  const urls = pkiUrls(publicBaseUrl(config));
  try {
    const outcome = await withGenerations(config, (generations) =>
      rolloverIssuingCa({ dataDir: config.dataDir, urls, root, generations }),
    );
    await journal(config, 'pki.issuing_ca_rollover', {
      retired: outcome.retired.tag,
      retiredKeyId: outcome.retired.keyId,
      current: outcome.tag,
      issuingCaSha256: sha256(outcome.issuingDer),
      ocspResponderSha256: sha256(outcome.responderDer),
      keyCustody: config.keys.provider,
    });
    process.stdout.write(
      `new issuing CA ${outcome.tag}: ${describe(p.issuingCert)}; retired ${outcome.retired.tag}; ${PICKED_UP}\n` +
        `destroy the retired key with qtsp pki ceremony --destroy-issuing-ca ${outcome.retired.tag} once its last ` +
        'certificate has expired (it refuses before)\n',
    );
    return 0;
  } catch (err) {
    return refused('--rollover-issuing-ca', err);
  }
}

const sha256 = (der: Buffer) => createHash('sha256').update(der).digest('hex');

function refused(step: string, err: unknown): number {
  if (!(err instanceof RolloverRefused)) throw err;
  process.stderr.write(`qtsp pki ceremony ${step}: ${err.message}\n`);
  return 1;
}

/** The last CRL of a retired CA, signed with its key before it is destroyed (revocation/crl.ts). */
function lastCrlSigner(store: Awaited<ReturnType<typeof openStore>>) {
  return (ca: KeyedCertificate, validitySeconds: number, now: Date) =>
    new CrlIssuer({ ca, revoked: store, validitySeconds, refreshSeconds: 0, clock: () => now }).current();
}

/** `--destroy-issuing-ca TAG`: refused while the retired CA's key is needed; `--dry-run` says only that. */
export async function destroyIssuingCa(
  config: Config,
  tag: string | undefined,
  flags: { 'dry-run': boolean },
  journal: JournalCaEvent,
): Promise<number> {
  const retired = retiredGenerations(config.dataDir);
  if (!tag || !retired.some((r) => r.tag === tag)) {
    const known = retired.map((r) => r.tag).join(', ') || 'none';
    process.stderr.write(`qtsp pki ceremony --destroy-issuing-ca: give a retired issuing CA (retired: ${known})\n`);
    return 2;
  }
  if (tag === generationTag(readFirst(pkiPaths(config.dataDir).issuingCert))) {
    process.stderr.write(`qtsp pki ceremony --destroy-issuing-ca: ${tag} is the current issuing CA\n`);
    return 2;
  }
  const store = await openStore(config);
  try {
    const outcome = await withGenerations(config, (generations) =>
      destroyRetiredKey({
        dataDir: config.dataDir,
        tag,
        store,
        generations,
        signerValiditySeconds: config.signer.validitySeconds,
        signLastCrl: lastCrlSigner(store),
        dryRun: flags['dry-run'],
      }),
    );
    if (flags['dry-run']) {
      process.stdout.write(`the key of issuing CA ${tag} is no longer needed: it may be destroyed\n`);
      return 0;
    }
    await journal(config, 'pki.issuing_ca_key_destroyed', {
      tag,
      keyId: outcome.record.keyId,
      destroyedAt: outcome.record.destroyedAt ?? null,
      lastCrlSha256: outcome.finalCrl ? sha256(outcome.finalCrl) : null,
      ocspResponderSha256: outcome.responderDer ? sha256(outcome.responderDer) : null,
    });
    process.stdout.write(
      `destroyed the key of issuing CA ${tag}; its last CRL and its responder certificate last until the CA ends; ` +
        `${PICKED_UP}\n`,
    );
    return 0;
  } catch (err) {
    return refused('--destroy-issuing-ca', err);
  } finally {
    await store.close();
  }
}

function readFirst(file: string): Buffer {
  return new X509Certificate(readFileSync(file)).raw;
}
