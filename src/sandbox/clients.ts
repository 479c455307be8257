/**
 * The RPs the platform knows (spec 2.14): client id, redirect URIs, account chooser redirect URIs (spec 2.1),
 * client state, allowed authorization data types, allowed_claims_qes, and the fingerprint of the self-signed TLS
 * client certificate (spec 5.1).
 * Two kinds: RPs whose certificate and key the sandbox holds (the default RP, the ones tests register; it
 * creates a self-signed certificate for them once, and again near its end), and RPs registered from outside
 * (client-file.ts), known only by their certificate's fingerprint.
 */
import { existsSync } from 'node:fs';
import { createTlsCertificate, saveKeyed } from '../ca/authority.ts';
import { DEFINED_CLAIMS } from './platform/constants.ts';
import { clientFileBase } from './paths.ts';
import { fingerprintsEqual, nearEnd, pemFingerprint } from './tls.ts';
import type { ClientState, ExternalClient, PlatformClient, RpRegistration } from './types.ts';

export const DEFAULT_RP_CLIENT_ID = 'sandbox-rp';

export interface RegisteredClient {
  readonly registration: PlatformClient;
  /** x5t#S256 of the registered certificate */
  readonly fingerprint: string;
  /** the sandbox's own RPs: their certificate and key files */
  readonly local?: RpRegistration;
}

export type ClientInput = Partial<RpRegistration> & { clientId: string; state: ClientState };

function defaultRedirectUri(clientId: string): string {
  return `https://rp.sandbox.localhost/${encodeURIComponent(clientId)}/callback`;
}

/** Where the default RP (`qtsp sign`) takes the account chooser's answer: next to its redirect URI. */
export function defaultAccountChooserRedirectUri(clientId: string): string {
  return `https://rp.sandbox.localhost/${encodeURIComponent(clientId)}/bank-chosen`;
}

/** The client's certificate files: given ones, or a self-signed certificate created once. */
function certificateFiles(
  clientsDir: string,
  input: ClientInput,
  previous?: RpRegistration,
): { certFile: string; keyFile: string } {
  if (input.certFile && input.keyFile) return { certFile: input.certFile, keyFile: input.keyFile };
  if (previous) return { certFile: previous.certFile, keyFile: previous.keyFile };
  const files = clientFileBase(clientsDir, input.clientId);
  if (!existsSync(files.certFile) || !existsSync(files.keyFile)) {
    saveKeyed(
      createTlsCertificate(undefined, { usage: 'client', commonName: input.clientId }),
      files.certFile,
      files.keyFile,
    );
  }
  return files;
}

export class ClientRegistry {
  private readonly clients = new Map<string, RegisteredClient>();

  constructor(private readonly clientsDir: string) {}

  /**
   * Adds or replaces a client whose key the sandbox holds; a replaced one keeps its certificate unless new files
   * are given.
   */
  register(input: ClientInput): RpRegistration {
    const previous = this.clients.get(input.clientId)?.local;
    const files = certificateFiles(this.clientsDir, input, previous);
    const redirectUris =
      input.redirectUris ??
      (input.redirectUri ? [input.redirectUri] : (previous?.redirectUris ?? [defaultRedirectUri(input.clientId)]));
    const registration: RpRegistration = {
      clientId: input.clientId,
      ...files,
      redirectUri: input.redirectUri ?? redirectUris[0]!,
      redirectUris: [...redirectUris],
      // spec 2.1: none unless given (or kept from the registration this one replaces)
      accountChooserRedirectUris: [...(input.accountChooserRedirectUris ?? previous?.accountChooserRedirectUris ?? [])],
      state: input.state,
      allowedClaimsQes: [...(input.allowedClaimsQes ?? previous?.allowedClaimsQes ?? DEFINED_CLAIMS)],
      allowedTypes: [...(input.allowedTypes ?? previous?.allowedTypes ?? ['sign'])],
    };
    this.clients.set(input.clientId, {
      registration,
      fingerprint: pemFingerprint(files.certFile),
      local: registration,
    });
    return { ...registration };
  }

  /** Adds or replaces an RP registered from outside: the platform knows its certificate by fingerprint only. */
  registerExternal(c: ExternalClient): PlatformClient {
    const registration: PlatformClient = {
      clientId: c.clientId,
      redirectUris: [...c.redirectUris],
      accountChooserRedirectUris: [...c.accountChooserRedirectUris],
      state: c.state,
      allowedClaimsQes: [...c.allowedClaimsQes],
      allowedTypes: [...c.allowedTypes],
    };
    this.clients.set(c.clientId, { registration, fingerprint: c.fingerprint });
    return registration;
  }

  get(clientId: string): RegisteredClient | undefined {
    return this.clients.get(clientId);
  }

  all(): RegisteredClient[] {
    return [...this.clients.values()];
  }

  /**
   * The self-signed certificates the sandbox made for its own RPs, made again (new key) when they near their end,
   * as an RP would register a new certificate: the banks accept the new one from then on. The client ids renewed.
   */
  renewNearEnd(now = new Date()): string[] {
    const renewed: string[] = [];
    for (const [clientId, client] of this.clients) {
      const own = clientFileBase(this.clientsDir, clientId);
      if (client.local?.certFile !== own.certFile || !nearEnd(own.certFile, now)) continue;
      saveKeyed(createTlsCertificate(undefined, { usage: 'client', commonName: clientId }), own.certFile, own.keyFile);
      this.clients.set(clientId, { ...client, fingerprint: pemFingerprint(own.certFile) });
      renewed.push(clientId);
    }
    return renewed;
  }

  /** The client whose registered certificate was presented on the connection (spec 5.1), if both match. */
  authenticate(clientId: string, presentedFingerprint: string | undefined): RegisteredClient | undefined {
    const client = this.clients.get(clientId);
    return client && fingerprintsEqual(presentedFingerprint, client.fingerprint) ? client : undefined;
  }
}
