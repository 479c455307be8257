/**
 * Public shapes of the sandbox ecosystem: the options it starts from, the handle tests and the CLI get
 * back, the RP registrations (spec 2.14) and the switches that make the sandbox misbehave on purpose.
 */

/** Client states of an RP at the platform (spec 3). */
export type ClientState = 'active' | 'demo' | 'inactive';

export interface SandboxOptions {
  /** files go to <dataDir>/sandbox/ */
  dataDir: string;
  /** listen address of both servers; default 127.0.0.1 */
  host?: string;
  /** bank AS HTTPS port; 0 picks a free port (tests); default 8441 */
  asPort?: number;
  /** platform HTTPS port (IDP directory, SP directory, service configuration); 0 = free; default 8442 */
  platformPort?: number;
  /** our QTSP's record in the SP directory (spec 2.13) */
  qtsp: { id: string; clientCertFile: string; signDocUrl: string };
  /** access token lifetime in seconds; default 300 */
  tokenLifetimeSeconds?: number;
}

/** An RP as the platform knows it (spec 2.14); the certificate is its self-signed TLS client certificate. */
export interface RpRegistration {
  clientId: string;
  certFile: string;
  keyFile: string;
  redirectUri: string;
  state: ClientState;
  allowedClaimsQes: string[];
  allowedTypes: string[];
}

export type IntrospectionMode = 'normal' | 'http500' | 'stall' | 'garbage' | 'unsigned';

/** Switches that tests flip to drive the QTSP's failure paths for real. A plain mutable object. */
export interface SandboxControls {
  introspection: {
    /** normal; http500: 500 JSON; stall: never answers; garbage: 200 non-JWT body; unsigned: alg none */
    mode: IntrospectionMode;
    /** 'foreign' signs with a key that is not in the JWKS (header kid still names the current AS key) */
    signingKey: 'as' | 'foreign';
    /** rewrites the payload just before it is signed */
    mutate?: (payload: Record<string, unknown>) => Record<string, unknown>;
  };
  jwks: { mode: 'normal' | 'http500' };
  /** A fresh AS signing key becomes current; the old one stays in the JWKS unless keepOld is false. */
  rotateAsKey(options?: { keepOld?: boolean }): Promise<string>;
  /** Status of the sandbox bank in the IDP directory (and thus the service configuration). */
  setIdpStatus(status: 'active' | 'inactive'): void;
  /** Everything back to normal: modes, IDP status, the persisted AS key as the only signing key. */
  reset(): void;
}

export interface MintOptions {
  /** header kid; default: the kid of the current AS key */
  kid?: string;
  /** 'as' (default) signs with the current AS key, 'foreign' with a key unknown to the JWKS */
  key?: 'as' | 'foreign';
  /** default RS256; 'none' gives an unsigned JWT */
  alg?: string;
}

export interface Sandbox {
  /** AS issuer URL, e.g. https://127.0.0.1:8441 */
  issuer: string;
  asUrl: string;
  platformUrl: string;
  /** `${platformUrl}/idps/v1/` */
  idpDirectoryUrl: string;
  /** `${platformUrl}/service-configuration/v1/` */
  serviceConfigurationUrl: string;
  /** `${platformUrl}/sps/v1/` */
  spDirectoryUrl: string;
  /** the sandbox TLS CA that issued every sandbox server certificate */
  tlsCaFile: string;
  /** TLS server certificate and key for the QTSP (SAN localhost, 127.0.0.1), issued by the sandbox TLS CA */
  qtspServerCertFile: string;
  qtspServerKeyFile: string;
  /** the default test RP, state active */
  rp: RpRegistration;
  /** Adds (or replaces) an RP; creates its self-signed client certificate unless certFile/keyFile are given. */
  registerClient(c: Partial<RpRegistration> & { clientId: string; state: ClientState }): Promise<RpRegistration>;
  controls: SandboxControls;
  /** For tests: signs an arbitrary SAD exactly as given. */
  mintAccessToken(claims: Record<string, unknown>, opts?: MintOptions): Promise<string>;
  close(): Promise<void>;
}
