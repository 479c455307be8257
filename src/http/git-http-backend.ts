/**
 * Smart HTTP for a git repository: `git http-backend` (git's own CGI program) behind a small CGI bridge, so
 * clients clone and pull over the real git protocol: the sandbox's key archive, and the journal's anchor
 * repository on the publication listener (journal/anchor-repo.ts). Read-only: only the upload-pack service
 * (clone, fetch) is offered; pushes are refused before git runs.
 *
 * The bridge spawns git asynchronously: a synchronous spawn blocks the event loop that the git client on the
 * other end may need (the QTSP's isomorphic-git, in the same process under `qtsp dev`), and deadlocks. CGI
 * (RFC 3875) is a handful of environment variables in, a header block and a body out; no library in our
 * dependencies speaks it, hence these few lines.
 */
import { spawn } from 'node:child_process';
import type { Request, Response } from 'express';

const HEADER_END = /\r?\n\r?\n/;
const MAX_HEADER_BYTES = 16 * 1024;

/**
 * the request path decoded, or undefined when it does not decode, climbs out of the project root, or has a
 * segment git http-backend dies on without an answer (`.`, a backslash, a NUL)
 */
function pathInfo(req: Request): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(req.path);
  } catch {
    return undefined;
  }
  const segments = path.split('/');
  return segments.includes('..') || segments.includes('.') || /[\\\0]/.test(path) ? undefined : path;
}

function allowed(req: Request): boolean {
  if (pathInfo(req) === undefined) return false;
  if (req.method === 'GET' && req.path.endsWith('/info/refs')) return req.query['service'] === 'git-upload-pack';
  return req.method === 'POST' && req.path.endsWith('/git-upload-pack');
}

function cgiEnvironment(req: Request, projectRoot: string): NodeJS.ProcessEnv {
  const query = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?') + 1) : '';
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    GIT_PROJECT_ROOT: projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    GIT_CONFIG_NOSYSTEM: '1',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    REQUEST_METHOD: req.method,
    PATH_INFO: pathInfo(req),
    QUERY_STRING: query,
    CONTENT_TYPE: req.get('content-type') ?? '',
    ...(req.get('content-length') ? { CONTENT_LENGTH: req.get('content-length') } : {}),
    ...(req.get('content-encoding') ? { HTTP_CONTENT_ENCODING: req.get('content-encoding') } : {}),
    ...(req.get('git-protocol') ? { GIT_PROTOCOL: req.get('git-protocol') } : {}),
    REMOTE_ADDR: req.socket.remoteAddress ?? '',
  };
}

/** Parses the CGI header block: `Status: 404 Not Found` sets the status, every other line is a header. */
function applyCgiHeaders(block: string, res: Response): void {
  let status = 200;
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
    else res.setHeader(name, value);
  }
  res.status(status);
}

/** An express handler serving every repository under projectRoot read-only over smart HTTP. */
export function gitHttpBackend(projectRoot: string) {
  return (req: Request, res: Response): void => {
    if (!allowed(req)) {
      res.status(403).type('text/plain').send('this repository is read-only over upload-pack\n');
      return;
    }
    const child = spawn('git', ['http-backend'], {
      env: cgiEnvironment(req, projectRoot),
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    let header = Buffer.alloc(0);
    let headerDone = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        res.write(chunk);
        return;
      }
      header = Buffer.concat([header, chunk]);
      const text = header.toString('latin1');
      const end = HEADER_END.exec(text);
      if (!end) {
        if (header.length > MAX_HEADER_BYTES) child.kill();
        return;
      }
      headerDone = true;
      applyCgiHeaders(text.slice(0, end.index), res);
      const rest = header.subarray(end.index + end[0].length);
      if (rest.length) res.write(rest);
    });
    child.stdout.on('end', () => {
      if (!headerDone && !res.headersSent) res.status(502).type('text/plain').send('git http-backend gave no answer\n');
      else res.end();
    });
    child.on('error', () => {
      if (!res.headersSent) res.status(502).type('text/plain').send('git http-backend could not be started\n');
      else res.destroy();
    });
    child.stdin.on('error', () => undefined); // git may exit before reading the whole body
    req.pipe(child.stdin);
    res.on('close', () => {
      if (child.exitCode === null) child.kill();
    });
  };
}
