/**
 * Our trust services assembled from the configuration and the material in <dataDir>/pki: the TSA (in-process,
 * or an external one when tsa.url is set), the OCSP responders of the issuing CA and of the root (each under
 * its delegated responder certificate), the CRLs of both CAs (the root's as signed at the key ceremony: its
 * key is offline), and the RevocationProvider the B-LT builders use. The HTTP side is http/pki-routes.ts.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { ConfigError } from './config/load.ts';
import type { HttpAgent as Agent } from './util/http-client.ts';
import type * as pkijs from 'pkijs';
import type { Config } from './config/schema.ts';
import { partsOf } from './util/der.ts';
import type { IssuedCertificate, Store } from './store/types.ts';
import { fromPem } from './util/base64.ts';
import type { KeyedCertificate } from './ca/authority.ts';
import { caKeyId } from './ca/certificate-list.ts';
import { CeremonyCrl, CrlIssuer, type CrlIssuerOptions, type CrlSource } from './revocation/crl.ts';
import { keyGenerationsOf, type KeyCustody } from './custody/types.ts';
import { loadCustodyMaterial, pkiPaths, type CustodyMaterial, type PublishedCertificate } from './ca/material.ts';
import type { TokenTrust } from './journal/token-trust.ts';
import { currentPublication, generationUrls, loadRetiredGenerations } from './ca/issuing-generations.ts';
import { OcspResponder, OcspResponders } from './revocation/ocsp.ts';
import { issuingCaPointers, pkiUrls, publicBaseUrl, type PkiUrls } from './ca/publication.ts';
import type { TimestampProvider } from './timestamping/provider.ts';
import type { RevocationProvider } from './revocation/provider.ts';
import { LocalRevocation } from './revocation/local.ts';
import { LocalTsa, RemoteTsa } from './timestamping/tsa.ts';

export type TrustStore = Pick<Store, 'certificateStatus' | 'revokedCertificates' | 'getCertificate' | 'addCertificate'>;

export interface TrustServices {
  readonly urls: PkiUrls;
  /** the root certificate: its key is offline */
  readonly root: PublishedCertificate;
  /** the issuing CA with the AIA / CRL DP extensions its signer certificates carry (signer-certificate.ts) */
  readonly issuing: KeyedCertificate & { readonly signerPointers: readonly pkijs.Extension[] };
  /** our own TSA (served at /tsa) */
  readonly tsa: LocalTsa;
  /** what B-T..B-LTA signatures use: our TSA, or the external one of tsa.url */
  readonly timestamps: TimestampProvider;
  /** another operator's TSA that time-stamps each journal batch besides ours (journal.secondTsaUrl) */
  readonly journalSecondTsa: TimestampProvider | undefined;
  /** answers for the issuing CA and the root, each under its delegated responder */
  readonly ocsp: OcspResponders;
  /** the delegated OCSP responders' certificates: the issuing CA's and the root's */
  readonly ocspResponderDer: Buffer;
  readonly rootOcspResponderDer: Buffer;
  readonly crls: { readonly root: CeremonyCrl; readonly issuing: CrlIssuer };
  readonly revocation: RevocationProvider;
  /** the issuing CA generation published under this tag ('' the first CA's paths): current or retired */
  issuingGeneration(publishedAs: string): IssuingGeneration | undefined;
  /** the retired issuing CAs (ca/rollover.ts), each still answering for the certificates it issued */
  readonly retiredGenerations: readonly IssuingGeneration[];
  /**
   * Reads the material again after a ceremony renewed some of it (ca/renewal.ts): the TSA, both delegated OCSP
   * responders and the root CRL serve the files' certificates, keys (a token's found again) and CRL from now on;
   * new certificates are registered in the store. After an issuing CA rollover the new CA issues from now on,
   * and the retired ones (ca/issuing-generations.ts) answer OCSP and CRLs for theirs.
   */
  reload(): Promise<void>;
}

function issuedRecord(der: Buffer, issuerKeyId: string): IssuedCertificate {
  const x = new X509Certificate(der);
  return {
    serialHex: partsOf(der).serialHex,
    issuerKeyId,
    subject: x.subject.split('\n').join(', '),
    notBefore: new Date(x.validFrom),
    notAfter: new Date(x.validTo),
    issuedAt: new Date(),
    txn: null,
    der,
  };
}

/**
 * The certificates our CAs issued outside signDoc (issuing CA, TSA, OCSP responders) go into the store, so
 * that `qtsp pki revoke` can revoke them and the CRLs and OCSP know them. Idempotent across restarts.
 */
export async function registerServiceCertificates(store: TrustStore, services: TrustServices): Promise<void> {
  const rootKeyId = services.crls.root.keyId.toString('hex');
  await registerRecords(store, [
    issuedRecord(services.issuing.der, rootKeyId),
    issuedRecord(services.tsa.chain[0]!, rootKeyId),
    issuedRecord(services.ocspResponderDer, services.crls.issuing.keyId.toString('hex')),
    issuedRecord(services.rootOcspResponderDer, rootKeyId),
    ...services.retiredGenerations.map((g) => issuedRecord(g.responder.responderDer, g.crl.keyId.toString('hex'))),
  ]);
}

/**
 * The certificates of material read again, registered before it is used: a signature made right after a
 * rollover asks the root's responder about the new CA, which must then answer "good", not "unknown".
 */
async function registerMaterial(store: TrustStore, m: CustodyMaterial): Promise<void> {
  const rootKeyId = caKeyId(m.root.der).toString('hex');
  await registerRecords(store, [
    issuedRecord(m.issuing.der, rootKeyId),
    issuedRecord(m.tsa.der, rootKeyId),
    issuedRecord(m.ocspResponder.der, caKeyId(m.issuing.der).toString('hex')),
    issuedRecord(m.rootOcspResponder.der, rootKeyId),
  ]);
}

async function registerRecords(store: TrustStore, records: readonly IssuedCertificate[]): Promise<void> {
  for (const record of records) {
    if (await store.getCertificate(record.serialHex)) continue;
    try {
      await store.addCertificate(record);
    } catch (err) {
      // another instance registered it in between
      if (!(await store.getCertificate(record.serialHex))) throw err;
    }
  }
}

/**
 * The certificates of tsa.chainFile (the external TSA's, its certificate first), checked at start: each one
 * parses and its issuer is itself, another certificate of the file, or our root. B-LT and B-LTA need every
 * issuer (EN 319 122-1 6.4), so a file that lacks one is a configuration error, not a failure of each call.
 */
export function externalTsaChain(config: Config, rootDer: Buffer): Buffer[] {
  const file = config.tsa.url ? config.tsa.chainFile : undefined;
  return file ? checkedChain('tsa.chainFile', file, [rootDer]) : [];
}

/** The certificates of journal.secondTsaChainFile (another operator's TSA: its own root), checked at start. */
export function journalSecondTsaChain(config: Config): Buffer[] {
  const file = config.journal.secondTsaUrl ? config.journal.secondTsaChainFile : undefined;
  return file ? checkedChain('journal.secondTsaChainFile', file, []) : [];
}

/** The PEM certificates of `file`, each issued by itself, another of the file or one of `anchors`. */
function checkedChain(setting: string, file: string, anchors: readonly Buffer[]): Buffer[] {
  const fail = (why: string) => new ConfigError(`setting ${setting}: ${file} ${why}`);
  if (!existsSync(file)) throw fail('does not exist');
  const chain = fromPem(readFileSync(file, 'utf8'));
  if (chain.length === 0) throw fail('holds no PEM certificate');
  const parts = chain.map((der, i) => {
    try {
      return partsOf(der);
    } catch {
      throw fail(`has a certificate ${i + 1} that is not X.509`);
    }
  });
  const known = [...parts, ...anchors.map(partsOf)].map((p) => p.subject);
  parts.forEach((p, i) => {
    if (!known.some((subject) => subject.equals(p.issuer)))
      throw fail(
        `lacks the issuer of certificate ${i + 1} (${new X509Certificate(p.der).issuer.replace(/\n/g, ', ')})`,
      );
  });
  return chain;
}

export interface TrustServicesOptions {
  readonly config: Config;
  readonly store: TrustStore;
  /** agent for an external TSA over HTTPS (trusting trust.caFile) */
  readonly agent?: Agent;
  /** where the issuing CA, TSA and both OCSP responder keys live */
  readonly custody: Pick<KeyCustody, 'longLivedKey' | 'location'>;
  /** told of each CRL of the issuing CA signed here (the journal's pki.crl_issued, journal/ca-events.ts) */
  readonly crlIssued?: CrlIssuerOptions['issued'];
}

/** the second TSA of journal.secondTsaUrl: a client like the one of tsa.url, with that TSA's chain */
function secondTsa(config: Config, agent: Agent | undefined): RemoteTsa | undefined {
  const url = config.journal.secondTsaUrl;
  if (!url) return undefined;
  return new RemoteTsa({
    url,
    timeoutMs: config.tsa.timeoutMs,
    retries: config.tsa.retries,
    chain: journalSecondTsaChain(config),
    ...(agent && url.startsWith('https:') ? { agent } : {}),
  });
}

/** One generation of the issuing CA as served: its responder, its CRL, the paths it is published at. */
export interface IssuingGeneration {
  readonly der: Buffer;
  /** '' for the first CA's paths, else the tag in them (ca/issuing-generations.ts) */
  readonly publishedAs: string;
  readonly responder: OcspResponder;
  /** signed here while the CA key exists; its final CRL once the key is destroyed */
  readonly crl: CrlSource;
}

/** The TSA of the material, and what B-T..B-LTA signatures use: it, or the external one of tsa.url. */
function timeStamping(
  options: TrustServicesOptions,
  material: CustodyMaterial,
): Pick<TrustServices, 'tsa' | 'timestamps'> {
  const { config } = options;
  const tsa = new LocalTsa(material.tsa, material.root.der, {
    policyOid: config.tsa.policyOid,
    accuracySeconds: config.tsa.accuracySeconds,
    keyUsageDays: config.calendar.tsuKeyUsageDays,
  });
  const timestamps = config.tsa.url
    ? new RemoteTsa({
        url: config.tsa.url,
        timeoutMs: config.tsa.timeoutMs,
        retries: config.tsa.retries,
        chain: externalTsaChain(config, material.root.der),
        ...(options.agent && config.tsa.url.startsWith('https:') ? { agent: options.agent } : {}),
      })
    : tsa;
  return { tsa, timestamps };
}

/**
 * The issuing CA's generations as served: the current one (its certificate, responder, CRL and the pointers its
 * signer certificates carry) and the retired ones of a rollover, read again by reload().
 */
function issuingGenerations(options: TrustServicesOptions, urls: PkiUrls, material: CustodyMaterial) {
  const { config, store } = options;
  const responder = (responderCert: KeyedCertificate, ca: { der: Buffer }) =>
    new OcspResponder({
      responder: responderCert,
      ca,
      status: store,
      validitySeconds: config.revocation.ocspValiditySeconds,
    });
  // the current CA's CRLs go on record (options.crlIssued); a retired CA's last ones were journaled with it
  const crlIssuer = (ca: KeyedCertificate, issued?: CrlIssuerOptions['issued']) =>
    new CrlIssuer({
      ca,
      revoked: store,
      validitySeconds: config.revocation.crlValiditySeconds,
      refreshSeconds: config.revocation.crlRefreshSeconds,
      ...(issued ? { issued } : {}),
    });
  const currentOf = (m: CustodyMaterial) => {
    const publishedAs = currentPublication(config.dataDir);
    return {
      der: m.issuing.der,
      publishedAs,
      responder: responder(m.ocspResponder, m.issuing),
      crl: crlIssuer(m.issuing, options.crlIssued),
      issuing: { ...m.issuing, signerPointers: issuingCaPointers(generationUrls(urls, publishedAs)) },
    };
  };
  let current = currentOf(material);
  let retired: IssuingGeneration[] = [];
  return {
    rootResponder: responder(material.rootOcspResponder, material.root),
    current: () => current,
    retired: () => retired,
    /** Reads the retired generations; the returned commit switches to them and `renewed` at once (sync). */
    async prepare(renewed: CustodyMaterial): Promise<() => void> {
      const loaded = (await loadRetiredGenerations(config.dataDir, options.custody)).map((g) => ({
        der: g.caDer,
        publishedAs: g.record.publishedAs,
        responder: responder(g.responder, { der: g.caDer }),
        crl: g.ca ? crlIssuer(g.ca) : new CeremonyCrl(g.caDer, g.finalCrl!),
      }));
      const next = renewed.issuing.der.equals(current.der) ? undefined : currentOf(renewed);
      return () => {
        if (next) current = next;
        else current.responder.renew(renewed.ocspResponder);
        retired = loaded;
      };
    },
  };
}

export function createTrustServices(options: TrustServicesOptions): TrustServices {
  const { config, store } = options;
  const urls = pkiUrls(publicBaseUrl(config));
  const material = loadCustodyMaterial(config.dataDir, options.custody);
  const { root } = material;
  const { tsa, timestamps } = timeStamping(options, material);
  const issuing = issuingGenerations(options, urls, material);
  const { rootResponder } = issuing;
  const rootCrl = new CeremonyCrl(root.der, material.rootCrl);
  const retired = issuing.retired;
  const responders = () => [issuing.current().responder, rootResponder, ...retired().map((g) => g.responder)];
  const crlSources = () => [rootCrl, issuing.current().crl, ...retired().map((g) => g.crl)];
  const ocsp = new OcspResponders(responders());
  const revocation = new LocalRevocation(responders(), store, crlSources());
  const generations = keyGenerationsOf(options.custody);
  const services: TrustServices = {
    urls,
    root,
    get issuing() {
      return issuing.current().issuing;
    },
    tsa,
    timestamps,
    journalSecondTsa: secondTsa(config, options.agent),
    ocsp,
    get ocspResponderDer() {
      return issuing.current().responder.responderDer;
    },
    get rootOcspResponderDer() {
      return rootResponder.responderDer;
    },
    crls: {
      root: rootCrl,
      get issuing() {
        return issuing.current().crl;
      },
    },
    revocation,
    issuingGeneration: (publishedAs) => [issuing.current(), ...retired()].find((g) => g.publishedAs === publishedAs),
    get retiredGenerations() {
      return retired();
    },
    async reload() {
      // a renewal or a rollover moved the token's labels: the new keys, checked against the certificates below
      await generations?.refreshLongLivedKeys();
      const renewed = loadCustodyMaterial(config.dataDir, options.custody);
      await registerMaterial(store, renewed);
      const switchIssuing = await issuing.prepare(renewed);
      // from here on synchronous: no signature sees a new CA without its responder and CRL
      tsa.renew(renewed.tsa);
      switchIssuing();
      rootResponder.renew(renewed.rootOcspResponder);
      rootCrl.renew(renewed.rootCrl);
      ocsp.replace(responders());
      revocation.replace(responders(), crlSources());
      await registerServiceCertificates(store, services);
    },
  };
  return services;
}

/** The first PEM certificate of `file`, or an error naming the file. */
export function firstCertificate(file: string): Buffer {
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  const der = fromPem(readFileSync(file, 'utf8'))[0];
  if (!der) throw new Error(`${file} holds no PEM certificate`);
  return der;
}

/**
 * What the journal audit trusts (journal/token-trust.ts) with `root` (DER) as the anchor: our TSA certificate of
 * the CA material (earlier generations come from the store's records, each judged against that root); the
 * external TSA's chain (tsa.chainFile) when one time-stamps in place of ours; the second TSA's chain
 * (journal.secondTsaChainFile). `qtsp evidence audit` and the service's scheduled audit alike.
 */
export function journalTrust(config: Config, root: Buffer): TokenTrust {
  const p = pkiPaths(config.dataDir);
  const secondFile = config.journal.secondTsaChainFile;
  return {
    ours: {
      root,
      certificates: existsSync(p.tsaCert) ? [firstCertificate(p.tsaCert)] : [],
      keyUsageDays: config.calendar.tsuKeyUsageDays,
    },
    external: config.tsa.url ? externalTsaChain(config, root) : undefined,
    second: secondFile ? fromPem(readFileSync(secondFile, 'utf8')) : undefined,
  };
}
