/**
 * The demo relying party's HTTPS listener: the app of app.ts with the TLS server certificate the caller hands
 * over (the sandbox issues it; this module does not know the sandbox). TLS 1.2 or newer.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { Socket } from 'node:net';
import { listen, urlHost } from '../../util/listen.ts';
import { type DemoRpOptions, demoRpApp } from './app.ts';

export type { DemoRpOptions } from './app.ts';

export interface DemoRpServer {
  /** e.g. https://127.0.0.1:8444/ */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

export interface DemoRpListen {
  readonly host: string;
  /** 0 = a free port (the caller must know the port first when it registers the redirect URI) */
  readonly port: number;
  readonly tls: { readonly certFile: string; readonly keyFile: string };
}

export async function startDemoRp(at: DemoRpListen, options: DemoRpOptions): Promise<DemoRpServer> {
  const server = createServer(
    { cert: readFileSync(at.tls.certFile), key: readFileSync(at.tls.keyFile), minVersion: 'TLSv1.2' },
    demoRpApp(options),
  );
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const port = await listen(server, at.port, at.host);
  const host = at.host === '0.0.0.0' || at.host === '::' ? '127.0.0.1' : urlHost(at.host);
  return {
    url: `https://${host}:${port}/`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}
