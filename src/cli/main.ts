/**
 * `qtsp` command line:
 *   qtsp dev                      sandbox ecosystem + QTSP on loopback (what `npm start` runs)
 *   qtsp serve                    the QTSP alone, configured by QTSP_* environment variables
 *   qtsp pki init [--rsa] [--force] [--pkcs11]   create the CA material (CA keys in the token with --pkcs11)
 *   qtsp pki root                 print the root CA certificate (PEM)
 *   qtsp pki revoke SERIAL        revoke a certificate we issued (OCSP and CRL say so at once)
 *   qtsp sign FILE... [options]   act as a relying party: get each file signed through the whole flow
 *   qtsp evidence show TXN        what the evidence store holds for an AS transaction
 *   qtsp evidence verify TXN      re-check that evidence against the key archive's history
 *   qtsp evidence export          the evidence of a period as an archive with a time-stamped manifest
 *   qtsp evidence record TXN      the RFC 4998 evidence records of a txn's journal entries
 *   qtsp evidence audit           recompute the sealed journal and name what changed
 *   qtsp evidence renew           renew the evidence records' time-stamps or hash trees (RFC 4998 section 5)
 *   qtsp worker                   deliver mediation records and notifications (outbox -> queue -> receivers)
 *   qtsp mediation status         outbox and queue depth, records confirmed by the mediation service
 *   qtsp notify --txn --message-file   queue an end-user notification (spec 6.3)
 */
import { ConfigError } from '../config/load.ts';

const USAGE = `usage:
  qtsp dev [--clients FILE] [--client JSON]
                                   start the sandbox ecosystem and the QTSP (sandbox defaults); --clients
                                   registers relying parties at the sandbox platform (README)
  qtsp serve                       start the QTSP alone (configuration: QTSP_* environment variables)
  qtsp sandbox --signdoc-url URL [--clients FILE] [--client JSON]
                                   start the sandbox ecosystem alone (prints its addresses as JSON)
  qtsp pki init [--rsa] [--force] [--pkcs11]
                                   create root CA, issuing CA, TSA, OCSP responder and our TLS client
                                   certificate; --pkcs11: the issuing CA, TSA and both OCSP responder keys
                                   are generated in the token of keys.pkcs11Module (the root CA key stays a
                                   file)
  qtsp pki root                    print the root CA certificate (PEM)
  qtsp pki revoke SERIAL [--reason REASON]
                                   mark a certificate we issued revoked: OCSP answers "revoked", the CRL lists it
  qtsp sign FILE... | --hash B64... [--hash-alg sha-256] [--format C|P|X] [--level B-B] [--sign-algo ALG]
            [--data-dir DIR]       sign files or given hashes as a relying party against the sandbox that
                                   runs with data directory DIR (default QTSP_DATA_DIR, else ./data);
                                   qtsp sign --help for every option
  qtsp evidence show TXN [--data-dir DIR] [--json]
                                   print the stored signing(s), certificate(s) and introspection JWT of a txn
  qtsp evidence verify TXN [--data-dir DIR]
                                   re-check the stored introspection JWT with the key the archive held at its iat
  qtsp evidence export --from DATE --to DATE --out DIR [--data-dir DIR] [--tsa-url URL] [--publication-url URL]
                                   write the evidence of signings recorded in [from, to) to a new directory:
                                   JWTs, certificates, kept signatures, manifest.json time-stamped by our TSA
  qtsp evidence record TXN --out DIR [--root FILE] [--data-dir DIR]
                                   write each journal entry of the txn's signings (canonical JSON) with its
                                   RFC 4998 evidence record (DER), for BouncyCastle or any RFC 4998 verifier,
                                   and tsa-chain.pem (our TSA certificates up to our root)
  qtsp evidence audit [--from DATE] [--to DATE] [--root FILE] [--anchor FILE|DIR|URL] [--data-dir DIR] [--json]
                                   recompute every sealed batch: the chain, each time-stamp (judged against
                                   our root: --root, else the data directory's), and each entry altered,
                                   deleted, inserted, moved (or purged by policy); exit 1 on a finding;
                                   --anchor: batch roots kept elsewhere (a file saved from GET /journal/batches,
                                   a clone of /journal/batches.git, or that URL): names a truncated tail or a
                                   re-sealed batch
  qtsp evidence renew [--force] [--hash SHA-512] [--data-dir DIR] [--tsa-url URL]
                                   RFC 4998 renewal of the records: a time-stamp renewal when the TSA
                                   certificate nears its end (or --force), a hash-tree renewal with --hash
  qtsp worker                      deliver mediation records and notifications (beside QTSP instances started
                                   with QTSP_DELIVERY_IN_PROCESS_WORKER=false)
  qtsp mediation status [--json]   outbox depth, queue depth, records the mediation service confirmed
  qtsp notify --txn TXN --message-file FILE [--iss ISS]
                                   queue an end-user notification to the IDP of that transaction (spec 6.3)
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // each command's module loaded when it runs: a command starts without compiling the others' dependencies
  // (the signDoc schema, the sandbox, the queue clients)
  switch (command) {
    case 'dev':
      return (await import('./serve.ts')).runDev(rest);
    case 'serve':
      return (await import('./serve.ts')).runServe(rest);
    case 'sandbox':
      return (await import('./serve.ts')).runSandbox(rest);
    case 'pki':
      return (await import('./pki.ts')).runPki(rest);
    case 'sign':
      return (await import('./sign.ts')).runSign(rest);
    case 'evidence':
      return (await import('./evidence.ts')).runEvidence(rest);
    case 'worker':
      return (await import('./worker.ts')).runWorker(rest);
    case 'mediation':
      return (await import('./mediation.ts')).runMediation(rest);
    case 'notify':
      return (await import('./notify.ts')).runNotify(rest);
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`unknown command: ${command}\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== -1) process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof ConfigError) process.stderr.write(`configuration error:\n${err.message}\n`);
    else process.stderr.write(`qtsp: ${(err as Error)?.message ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
