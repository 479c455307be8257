/**
 * The transport floor of one signDoc, for bench/sign-doc.bench.ts: what Node.js itself spends, in a process of
 * its own, to carry a signDoc's traffic with no QTSP logic at all. Same TLS material and settings as `qtsp serve`
 * (server certificate, requested client certificate, TLS >= 1.2), same load generator and request bodies, and
 * per call exactly the QTSP's I/O shape:
 *   read the mutual-TLS POST and JSON.parse its body; read the client certificate (as signDoc does);
 *   POST the SAD to the sandbox AS's real introspection endpoint with the QTSP's own HTTP client and agent
 *   (util/http-client.ts on undici, trust/agents.ts settings) and read the signed answer, verifying nothing;
 *   answer 200 with a JSON body the size of a B-B signDoc answer for as many hashes as the request has.
 * No store, no Redis, no crypto beyond TLS. The QTSP's CPU per signDoc divided by this process's CPU per call is
 * how far the QTSP stands from what any Node.js service with this interface must spend.
 *
 * Configuration as `qtsp serve` (QTSP_* variables, config/load.ts); BENCH_FLOOR_ISSUER is the sandbox AS, whose
 * metadata names the introspection endpoint. Prints "floor serving at URL" once listening.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { loadConfig } from '../src/config/load.ts';
import { createOutgoingAgents } from '../src/trust/agents.ts';
import { metadataUrl } from '../src/trust/authorization-servers.ts';
import { httpRequest, jsonBody } from '../src/util/http-client.ts';
import { listen, urlHost } from '../src/util/listen.ts';

const config = loadConfig({}, process.env);
const agent = createOutgoingAgents(config).mtls;
const introspectUrl = new URL(
  (
    jsonBody(await httpRequest(metadataUrl(process.env.BENCH_FLOOR_ISSUER!), { agent, timeoutMs: 10_000 })) as {
      introspection_endpoint: string;
    }
  ).introspection_endpoint,
);
/** the size of a B-B answer for `hashes` hashes: a CAdES of about 1.2 KB in Base64 each, plus the txn */
const answers = new Map<number, Buffer>();
function answerFor(hashes: number): Buffer {
  let answer = answers.get(hashes);
  if (!answer) {
    const signatures = Array.from({ length: hashes }, () => randomBytes(1250).toString('base64'));
    answer = Buffer.from(JSON.stringify({ SignatureObject: signatures, txn: randomBytes(16).toString('hex') }));
    answers.set(hashes, answer);
  }
  return answer;
}

/** as introspection/client.ts calls it */
async function introspect(token: string): Promise<number> {
  const body = new URLSearchParams({ client_id: config.qtspId, token }).toString();
  const res = await httpRequest(introspectUrl, {
    method: 'POST',
    agent,
    timeoutMs: 10_000,
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/jwt' },
    body,
    maxResponseBytes: 256 * 1024,
    repeatOnStaleSocket: true,
  });
  return res.body.length;
}

const server = https.createServer(
  {
    cert: readFileSync(config.server.tlsCertFile),
    key: readFileSync(config.server.tlsKeyFile),
    minVersion: 'TLSv1.2',
    requestCert: true,
    rejectUnauthorized: false,
  },
  (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      (req.socket as TLSSocket).getPeerCertificate(false);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        SAD: string;
        documentDigests: { hashes: string[] };
      };
      const answer = answerFor(body.documentDigests.hashes.length);
      introspect(body.SAD).then(
        () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }).end(answer),
        (err: Error) => res.writeHead(502, { 'content-type': 'text/plain' }).end(err.message),
      );
    });
  },
);
server.keepAliveTimeout = 65_000;
const port = await listen(server, 0, config.server.host);
process.stdout.write(`floor serving at https://${urlHost(config.server.host)}:${port}${config.server.signDocPath}\n`);
process.on('SIGTERM', () => {
  agent.destroy();
  server.close();
  server.closeAllConnections();
  if (process.connected) process.disconnect(); // the benchmark's IPC channel would keep us alive
});
