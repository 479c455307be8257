/**
 * Public shapes of the sandbox ecosystem: the options it starts from, the handle tests and the CLI get
 * back, the RP registrations (spec 2.14) and the switches that make the sandbox misbehave on purpose.
 */
import type { SmtpControls, SmtpSink } from './mail/smtp-sink.ts';
import type { StoredRecord } from './mediation/records.ts';

/** Client states of an RP at the platform (spec 3). */
export type ClientState = 'active' | 'demo' | 'inactive';

export interface SandboxOptions {
  /** files go to <dataDir>/sandbox/ */
  dataDir: string;
  /** listen address of every server; default 127.0.0.1 */
  host?: string;
  /** bank 1's AS HTTPS port; 0 picks a free port (tests); default 8441 */
  asPort?: number;
  /** bank 2's AS HTTPS port; 0 = free; default 8445, or a free port when asPort is 0 */
  secondAsPort?: number;
  /** platform HTTPS port (IDP directory, SP directory, service configuration); 0 = free; default 8442 */
  platformPort?: number;
  /** our QTSP's record in the SP directory (spec 2.13) */
  qtsp: { id: string; clientCertFile: string; signDocUrl: string };
  /** mediation service HTTPS port; 0 = free; default 8443 */
  mediationPort?: number;
  /** SMTP sink port; 0 = free; default 2525 */
  smtpPort?: number;
  /** access token lifetime in seconds; default 300 */
  tokenLifetimeSeconds?: number;
  /** life of the bank's consent page in seconds; default 300 (spec 5.10: minutes) */
  consentLifetimeSeconds?: number;
  /** pending consents (open bank pages) each bank keeps at most; default 1000; beyond, temporarily_unavailable */
  maxPendingConsents?: number;
  /** relying parties registered from files or the command line (client-file.ts), besides the default RP */
  clients?: readonly ExternalClient[];
}

/** An RP registered from outside (client-file.ts): the sandbox does not hold its key. */
export interface ExternalClient {
  readonly clientId: string;
  readonly redirectUris: readonly string[];
  /** where the account chooser redirects to (spec 2.1); the chooser uses the first; none: it refuses the RP */
  readonly accountChooserRedirectUris: readonly string[];
  readonly state: ClientState;
  readonly fingerprint: string;
  /** the registered certificate's file, when it was given as a file (for endpoints.json) */
  readonly certFile?: string;
  readonly allowedClaimsQes: readonly string[];
  readonly allowedTypes: readonly string[];
}

/** An RP as the platform knows it (spec 2.14). */
export interface PlatformClient {
  readonly clientId: string;
  /** compared as strings with the redirect_uri of PAR (RFC 6749 3.1.2.2, RFC 9700 2.1) */
  readonly redirectUris: readonly string[];
  /** the account chooser's redirect targets (spec 2.1, 4.1); it uses the first */
  readonly accountChooserRedirectUris: readonly string[];
  readonly state: ClientState;
  readonly allowedClaimsQes: readonly string[];
  readonly allowedTypes: readonly string[];
}

/**
 * An RP whose self-signed TLS client certificate and key the sandbox holds (the default RP, the ones tests
 * register): what `qtsp sign` and the tests play. RPs registered from a file (client-file.ts) bring their own key.
 */
export interface RpRegistration {
  clientId: string;
  certFile: string;
  keyFile: string;
  /** the first of redirectUris: where this RP's flow redirects to */
  redirectUri: string;
  redirectUris: string[];
  /** the account chooser's redirect targets (spec 2.1); default none (the chooser then refuses this RP) */
  accountChooserRedirectUris: string[];
  state: ClientState;
  allowedClaimsQes: string[];
  allowedTypes: string[];
}

/** reset: the connection is cut without an answer (an AS that went down) */
export type IntrospectionMode = 'normal' | 'http500' | 'stall' | 'garbage' | 'unsigned' | 'reset';

/** IDP directory route of the platform: normal; http500: 500 JSON; reset: the connection is cut, no answer */
export type IdpDirectoryMode = 'normal' | 'http500' | 'reset';

/** The long-term public key archive (spec 4.7) as tests push to it. */
export interface KeyArchiveControls {
  /**
   * Commits the current key sets (plus the AS's foreign key when addForeignKey: an attacker slipping in their
   * own key), signed by the operating party, by a foreign OpenPGP key, or not at all.
   */
  commit(options: {
    signedBy: 'operator' | 'foreign' | 'none';
    addForeignKey?: boolean;
  }): Promise<{ commit: string; foreignKid?: string }>;
  /** the archive's current head commit */
  head(): Promise<string | undefined>;
}

/**
 * Mediation service (spec 6.2): normal; http500: 500; stall: never answers; store-then-500: stores, then 500;
 * store-then-stall: stores, then never answers (both: the answer is lost, the record is not)
 */
export type MediationMode = 'normal' | 'http500' | 'stall' | 'store-then-500' | 'store-then-stall';

export interface MediationControls {
  mode: MediationMode;
  /** answer 503 to this many requests (counting down), then behave as `mode` says */
  failNext: number;
}

/** Switches that tests flip to drive the QTSP's failure paths for real. A plain mutable object. */
export interface SandboxControls {
  introspection: {
    /** normal; http500: 500 JSON; stall: never answers; garbage: 200 non-JWT body; unsigned: alg none */
    mode: IntrospectionMode;
    /** 'foreign' signs with a key that is not in the JWKS (header kid still names the current AS key) */
    signingKey: 'as' | 'foreign';
    /** rewrites the payload just before it is signed */
    mutate?: (payload: Record<string, unknown>) => Record<string, unknown>;
    /** awaited before each answer: keeps signDoc calls in flight for as long as a test wants (graceful stop) */
    hold?: () => Promise<void>;
  };
  jwks: { mode: 'normal' | 'http500' };
  idpDirectory: { mode: IdpDirectoryMode };
  mediation: MediationControls;
  smtp: SmtpControls;
  /**
   * A fresh AS signing key becomes current; the old one stays in the JWKS unless keepOld is false. The key
   * archive gets a signed commit with the new JWK Set before this resolves. bic: which bank (default bank 1).
   */
  rotateAsKey(options?: { keepOld?: boolean; bic?: string }): Promise<string>;
  /**
   * Status of a bank in the IDP directory (and thus the service configuration, the account chooser and the key
   * archive); bic: which bank (default bank 1).
   */
  setIdpStatus(status: 'active' | 'inactive', bic?: string): void;
  keyArchive: KeyArchiveControls;
  /**
   * Everything back to normal: modes, every bank's IDP status, each bank's persisted AS key as its only signing
   * key, and the key archive back on its last operator-signed commit with the current keys (resolves when that
   * is committed).
   */
  reset(): Promise<void>;
}

export interface MintOptions {
  /** header kid; default: the kid of the current AS key */
  kid?: string;
  /** 'as' (default) signs with the current AS key, 'foreign' with a key unknown to the JWKS */
  key?: 'as' | 'foreign';
  /** default RS256; 'none' gives an unsigned JWT */
  alg?: string;
  /** BIC of the bank whose keys sign; default bank 1 (the claims, iss included, stay exactly as given) */
  bic?: string;
}

/** A bank of the sandbox (spec 2.1, 4.6): its own AS and issuer. */
export interface SandboxBank {
  readonly issuer: string;
  readonly bic: string;
  readonly name: string;
}

export interface Sandbox {
  /** bank 1's AS issuer URL, e.g. https://127.0.0.1:8441 */
  issuer: string;
  asUrl: string;
  /** every bank, bank 1 first (SNDBDEFFXXX "Sandbox Bank", SNDCDEFFXXX "Second Sandbox Bank") */
  banks: readonly SandboxBank[];
  platformUrl: string;
  /** the account chooser (spec 2.1, 4.1): `${platformUrl}/account-chooser/`; its cookie reset: `...cookie` */
  accountChooserUrl: string;
  /** `${platformUrl}/idps/v1/` */
  idpDirectoryUrl: string;
  /** `${platformUrl}/service-configuration/v1/` */
  serviceConfigurationUrl: string;
  /** smart-HTTP URL of the long-term public key archive (spec 4.7), `${platformUrl}/key-archive/keys.git` */
  keyArchiveUrl: string;
  /** the operating party's OpenPGP public key that signs every archive commit (armored) */
  keyArchiveSignerKeyFile: string;
  /** `${platformUrl}/sps/v1/` */
  spDirectoryUrl: string;
  /** where service providers post mediation records (spec 6.2): https://host:port/mediation/v1/records (mTLS) */
  mediationUrl: string;
  /** what the mediation service holds */
  mediation: { records(): readonly StoredRecord[]; readonly requests: number; clear(): void };
  /** the SMTP sink behind the banks' notification_email addresses (spec 6.3) */
  smtp: SmtpSink;
  /** the sandbox TLS CA that issued every sandbox server certificate */
  tlsCaFile: string;
  /** TLS server certificate and key for the QTSP (SAN localhost, 127.0.0.1), issued by the sandbox TLS CA */
  qtspServerCertFile: string;
  qtspServerKeyFile: string;
  /** the default test RP, state active */
  rp: RpRegistration;
  /** Adds (or replaces) an RP; creates its self-signed client certificate unless certFile/keyFile are given. */
  registerClient(c: Partial<RpRegistration> & { clientId: string; state: ClientState }): Promise<RpRegistration>;
  /** Every RP the platform knows (the default RP, registered ones), as spec 2.14 configures them. */
  clients(): PlatformClient[];
  controls: SandboxControls;
  /** For tests: signs an arbitrary SAD exactly as given. */
  mintAccessToken(claims: Record<string, unknown>, opts?: MintOptions): Promise<string>;
  close(): Promise<void>;
}
