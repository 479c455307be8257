/**
 * Our trust services assembled from the configuration and the material in <dataDir>/pki: the TSA (in-process,
 * or an external one when tsa.url is set), the OCSP responder of the issuing CA, the CRLs of both CAs, and the
 * RevocationProvider the B-LT builders use. The HTTP side of the same objects is http/pki-routes.ts.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { HttpAgent as Agent } from './util/http-client.ts';
import type * as pkijs from 'pkijs';
import type { Config } from './config/schema.ts';
import { partsOf } from './util/der.ts';
import type { IssuedCertificate, Store } from './store/types.ts';
import { fromPem } from './util/base64.ts';
import type { KeyedCertificate } from './ca/authority.ts';
import { CrlIssuer } from './revocation/crl.ts';
import type { KeyCustody } from './custody/types.ts';
import { loadCustodyMaterial } from './ca/material.ts';
import { OcspResponder } from './revocation/ocsp.ts';
import { issuingCaPointers, pkiUrls, publicBaseUrl, type PkiUrls } from './ca/publication.ts';
import type { TimestampProvider } from './timestamping/provider.ts';
import type { RevocationProvider } from './revocation/provider.ts';
import { LocalRevocation } from './revocation/local.ts';
import { LocalTsa, RemoteTsa } from './timestamping/tsa.ts';

export type TrustStore = Pick<Store, 'certificateStatus' | 'revokedCertificates' | 'getCertificate' | 'addCertificate'>;

export interface TrustServices {
  readonly urls: PkiUrls;
  readonly root: KeyedCertificate;
  /** the issuing CA with the AIA / CRL DP extensions its signer certificates carry (signer-certificate.ts) */
  readonly issuing: KeyedCertificate & { readonly signerPointers: readonly pkijs.Extension[] };
  /** our own TSA (served at /tsa) */
  readonly tsa: LocalTsa;
  /** what B-T..B-LTA signatures use: our TSA, or the external one of tsa.url */
  readonly timestamps: TimestampProvider;
  readonly ocsp: OcspResponder;
  /** the delegated OCSP responder's certificate */
  readonly ocspResponderDer: Buffer;
  readonly crls: { readonly root: CrlIssuer; readonly issuing: CrlIssuer };
  readonly revocation: RevocationProvider;
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
 * The certificates our CAs issued outside signDoc (issuing CA, TSA, OCSP responder) go into the store, so
 * that `qtsp pki revoke` can revoke them and the CRLs and OCSP know them. Idempotent across restarts.
 */
export async function registerServiceCertificates(store: TrustStore, services: TrustServices): Promise<void> {
  const records = [
    issuedRecord(services.issuing.der, services.crls.root.keyId.toString('hex')),
    issuedRecord(services.tsa.chain[0]!, services.crls.root.keyId.toString('hex')),
    issuedRecord(services.ocspResponderDer, services.crls.issuing.keyId.toString('hex')),
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

export interface TrustServicesOptions {
  readonly config: Config;
  readonly store: TrustStore;
  /** agent for an external TSA over HTTPS (trusting trust.caFile) */
  readonly agent?: Agent;
  /** where the issuing CA, TSA and OCSP responder keys live */
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
        chain: config.tsa.chainFile ? fromPem(readFileSync(config.tsa.chainFile, 'utf8')) : [],
        ...(options.agent && config.tsa.url.startsWith('https:') ? { agent: options.agent } : {}),
      })
    : tsa;
  const ocsp = new OcspResponder({
    responder: material.ocspResponder,
    ca: issuing,
    status: store,
    validitySeconds: config.revocation.ocspValiditySeconds,
  });
  const crlOptions = {
    revoked: store,
    validitySeconds: config.revocation.crlValiditySeconds,
    refreshSeconds: config.revocation.crlRefreshSeconds,
  };
  const crls = {
    root: new CrlIssuer({ ca: root, ...crlOptions }),
    issuing: new CrlIssuer({ ca: issuing, ...crlOptions }),
  };
  const revocation = new LocalRevocation(ocsp, issuing.der, store, [crls.root, crls.issuing]);
  return {
    urls,
    root,
    issuing: { ...issuing, signerPointers: issuingCaPointers(urls) },
    tsa,
    timestamps,
    ocsp,
    ocspResponderDer: material.ocspResponder.der,
    crls,
    revocation,
  };
}
