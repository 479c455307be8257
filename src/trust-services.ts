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
import { CeremonyCrl, CrlIssuer } from './revocation/crl.ts';
import type { KeyCustody } from './custody/types.ts';
import { loadCustodyMaterial, type PublishedCertificate } from './ca/material.ts';
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
  /** answers for the issuing CA and the root, each under its delegated responder */
  readonly ocsp: OcspResponders;
  /** the delegated OCSP responders' certificates: the issuing CA's and the root's */
  readonly ocspResponderDer: Buffer;
  readonly rootOcspResponderDer: Buffer;
  readonly crls: { readonly root: CeremonyCrl; readonly issuing: CrlIssuer };
  readonly revocation: RevocationProvider;
  /**
   * Reads the material again after a ceremony renewed some of it (ca/renewal.ts): the TSA, both delegated OCSP
   * responders and the root CRL serve the files' certificates, keys and CRL from now on; new certificates are
   * registered in the store. The CAs themselves do not change here.
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
  const records = [
    issuedRecord(services.issuing.der, services.crls.root.keyId.toString('hex')),
    issuedRecord(services.tsa.chain[0]!, services.crls.root.keyId.toString('hex')),
    issuedRecord(services.ocspResponderDer, services.crls.issuing.keyId.toString('hex')),
    issuedRecord(services.rootOcspResponderDer, services.crls.root.keyId.toString('hex')),
  ];
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
  if (!file) return [];
  const fail = (why: string) => new ConfigError(`setting tsa.chainFile: ${file} ${why}`);
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
  const known = [...parts.map((p) => p.subject), partsOf(rootDer).subject];
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
}

export function createTrustServices(options: TrustServicesOptions): TrustServices {
  const { config, store } = options;
  const urls = pkiUrls(publicBaseUrl(config));
  const material = loadCustodyMaterial(config.dataDir, options.custody);
  const { root, issuing } = material;
  const tsa = new LocalTsa(material.tsa, root.der, {
    policyOid: config.tsa.policyOid,
    accuracySeconds: config.tsa.accuracySeconds,
  });
  const timestamps = config.tsa.url
    ? new RemoteTsa({
        url: config.tsa.url,
        timeoutMs: config.tsa.timeoutMs,
        retries: config.tsa.retries,
        chain: externalTsaChain(config, root.der),
        ...(options.agent && config.tsa.url.startsWith('https:') ? { agent: options.agent } : {}),
      })
    : tsa;
  const { ocsp, revocation, crls, responders } = revocationServices(config, store, material);
  const services: TrustServices = {
    urls,
    root,
    issuing: { ...issuing, signerPointers: issuingCaPointers(urls) },
    tsa,
    timestamps,
    ocsp,
    get ocspResponderDer() {
      return responders.issuing.responderDer;
    },
    get rootOcspResponderDer() {
      return responders.root.responderDer;
    },
    crls,
    revocation,
    async reload() {
      const renewed = loadCustodyMaterial(config.dataDir, options.custody);
      tsa.renew(renewed.tsa);
      responders.issuing.renew(renewed.ocspResponder);
      responders.root.renew(renewed.rootOcspResponder);
      crls.root.renew(renewed.rootCrl);
      await registerServiceCertificates(store, services);
    },
  };
  return services;
}

/**
 * OCSP and CRLs: the issuing CA's responder and CRL signed here; for the root, whose key is offline, its
 * delegated responder (fresh status of the issuing CA and the TSA for B-LT) and the CRL of the ceremony.
 */
function revocationServices(
  config: Config,
  store: TrustStore,
  material: ReturnType<typeof loadCustodyMaterial>,
): Pick<TrustServices, 'ocsp' | 'revocation' | 'crls'> & {
  responders: { issuing: OcspResponder; root: OcspResponder };
} {
  const responder = (responderCert: KeyedCertificate, ca: { der: Buffer }) =>
    new OcspResponder({
      responder: responderCert,
      ca,
      status: store,
      validitySeconds: config.revocation.ocspValiditySeconds,
    });
  const issuing = responder(material.ocspResponder, material.issuing);
  const root = responder(material.rootOcspResponder, material.root);
  const responders = [issuing, root];
  const crls = {
    root: new CeremonyCrl(material.root.der, material.rootCrl),
    issuing: new CrlIssuer({
      ca: material.issuing,
      revoked: store,
      validitySeconds: config.revocation.crlValiditySeconds,
      refreshSeconds: config.revocation.crlRefreshSeconds,
    }),
  };
  const revocation = new LocalRevocation(responders, store, [crls.root, crls.issuing]);
  return { ocsp: new OcspResponders(responders), revocation, crls, responders: { issuing, root } };
}
