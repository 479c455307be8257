/**
 * Another operator's RFC 3161 TSA on loopback: `openssl ts -reply` behind a small HTTP server, with its own root
 * and TSA certificate made by `openssl req` / `openssl x509` (nothing of ours signs for it). `refuse(n)` makes
 * the next n requests answer HTTP 503, as a TSA that is down.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromPem } from '../../src/util/base64.ts';
import { opensslNewKey, opensslOk } from './openssl.ts';

export interface OpensslTsa {
  readonly url: string;
  /** the TSA certificate then its root (PEM), as journal.secondTsaChainFile wants it */
  readonly chainFile: string;
  /** its root alone (PEM), for `openssl ts -verify -CAfile` */
  readonly rootFile: string;
  readonly chain: readonly Buffer[];
  /** requests answered with a token so far */
  readonly granted: number;
  refuse(requests: number): void;
  close(): Promise<void>;
}

const tsaConfig = (dir: string) => `
[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
serial = ${dir}/serial
crypto_device = builtin
signer_cert = ${dir}/tsa.pem
signer_key = ${dir}/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = no
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
[ v3_tsa ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping
`;

/** a root and a TSA certificate of "Other Operator", valid a day */
async function makePki(dir: string): Promise<void> {
  writeFileSync(join(dir, 'tsa.cnf'), tsaConfig(dir));
  writeFileSync(join(dir, 'serial'), '01\n');
  const key = (name: string, subject: string, days?: number) =>
    opensslNewKey({
      keyFile: join(dir, `${name}.key`),
      out: join(dir, days ? `${name}.pem` : `${name}.csr`),
      subject,
      ...(days ? { days } : {}),
    });
  const root = await key('root', '/O=Other Operator/CN=Other Operator TSA Root', 2);
  if (!root.ok) throw new Error(root.output);
  const request = await key('tsa', '/O=Other Operator/CN=Other Operator TSA');
  if (!request.ok) throw new Error(request.output);
  await opensslOk([
    ...['x509', '-req', '-in', join(dir, 'tsa.csr'), '-CA', join(dir, 'root.pem')],
    ...['-CAkey', join(dir, 'root.key'), '-set_serial', '2', '-days', '1'],
    ...['-extfile', join(dir, 'tsa.cnf'), '-extensions', 'v3_tsa', '-out', join(dir, 'tsa.pem')],
  ]);
  writeFileSync(
    join(dir, 'chain.pem'),
    readFileSync(join(dir, 'tsa.pem'), 'utf8') + readFileSync(join(dir, 'root.pem'), 'utf8'),
  );
}

/** Starts the TSA in `dir` (created). One request at a time: openssl keeps its serial in one file. */
export async function startOpensslTsa(dir: string): Promise<OpensslTsa> {
  mkdirSync(dir, { recursive: true });
  await makePki(dir);
  let refusing = 0;
  let granted = 0;
  let queue: Promise<unknown> = Promise.resolve();
  const reply = async (query: Buffer): Promise<Buffer> => {
    writeFileSync(join(dir, 'query.tsq'), query);
    await opensslOk([
      ...['ts', '-reply', '-config', join(dir, 'tsa.cnf'), '-queryfile', join(dir, 'query.tsq')],
      ...['-out', join(dir, 'reply.tsr')],
    ]);
    return readFileSync(join(dir, 'reply.tsr'));
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (refusing > 0) {
        refusing--;
        res.writeHead(503).end();
        return;
      }
      const answered = queue.then(() => reply(Buffer.concat(chunks)));
      queue = answered.catch(() => undefined);
      answered.then(
        (body) => {
          granted++;
          res.writeHead(200, { 'content-type': 'application/timestamp-reply' }).end(body);
        },
        () => res.writeHead(500).end(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/tsa`,
    chainFile: join(dir, 'chain.pem'),
    rootFile: join(dir, 'root.pem'),
    chain: fromPem(readFileSync(join(dir, 'chain.pem'), 'utf8')),
    get granted() {
      return granted;
    },
    refuse(requests) {
      refusing = requests;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
