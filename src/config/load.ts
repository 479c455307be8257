/**
 * Loads the configuration once: environment variables (QTSP_*) and explicit overrides, validated against the
 * schema, derived paths filled in, then deep-frozen. A bad value throws ConfigError naming the setting.
 */
import { resolve, join } from 'node:path';
import { configSchema, sentinelUrlOf, type Config, type ConfigInput } from './schema.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function envName(path: readonly (string | number)[]): string {
  return (
    'QTSP_' +
    path
      .map((p) =>
        String(p)
          .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
          .toUpperCase(),
      )
      .join('_')
  );
}

/** Every leaf path of the schema, for reading environment variables. */
function leafPaths(shape: Record<string, unknown>, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  for (const [key, value] of Object.entries(shape)) {
    const inner = unwrapObjectShape(value);
    if (inner) out.push(...leafPaths(inner, [...prefix, key]));
    else out.push([...prefix, key]);
  }
  return out;
}

function unwrapObjectShape(schema: unknown): Record<string, unknown> | undefined {
  let s = schema as { def?: { type?: string; innerType?: unknown; shape?: Record<string, unknown> } } | undefined;
  while (s?.def && (s.def.type === 'default' || s.def.type === 'prefault' || s.def.type === 'optional')) {
    s = s.def.innerType as typeof s;
  }
  return s?.def?.type === 'object' ? s.def.shape : undefined;
}

function fromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const path of leafPaths(configSchema.shape)) {
    const value = env[envName(path)];
    if (value === undefined || value === '') continue;
    let node = input;
    for (const key of path.slice(0, -1)) {
      node[key] ??= {};
      node = node[key] as Record<string, unknown>;
    }
    node[path[path.length - 1]!] = value;
  }
  return input;
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && prev && typeof prev === 'object'
        ? merge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** redis.sentinels and redis.sentinelName written as the one URL every connection reads (util/redis-address.ts) */
function redisUrl(r: { url?: string; sentinels?: string[]; sentinelName?: string }): string | undefined {
  return r.sentinels?.length && r.sentinelName !== undefined ? sentinelUrlOf(r.sentinels, r.sentinelName) : r.url;
}

export function loadConfig(overrides: ConfigInput = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const result = configSchema.safeParse(merge(fromEnv(env), overrides as Record<string, unknown>));
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      const path = issue.path.map(String);
      const where = path.length ? `${path.join('.')} (${envName(path)})` : 'configuration';
      return `invalid setting ${where}: ${issue.message}`;
    });
    throw new ConfigError(lines.join('\n'));
  }
  const c = result.data;
  const dataDir = resolve(c.dataDir);
  const config: Config = {
    ...c,
    dataDir,
    server: {
      ...c.server,
      tlsCertFile: c.server.tlsCertFile ?? join(dataDir, 'sandbox', 'qtsp-server.pem'),
      tlsKeyFile: c.server.tlsKeyFile ?? join(dataDir, 'sandbox', 'qtsp-server.key.pem'),
    },
    client: {
      certFile: c.client.certFile ?? join(dataDir, 'pki', 'qtsp-client.pem'),
      keyFile: c.client.keyFile ?? join(dataDir, 'pki', 'qtsp-client.key.pem'),
    },
    redis: { ...c.redis, url: redisUrl(c.redis) },
    trust: {
      ...c.trust,
      caFile: c.trust.caFile ?? join(dataDir, 'sandbox', 'tls-ca.pem'),
      keyArchiveSignerKeyFile:
        c.trust.keyArchiveSignerKeyFile ?? join(dataDir, 'sandbox', 'key-archive-signer.pub.asc'),
    },
  };
  return deepFreeze(config);
}
