/**
 * docker/compose.yaml carried out with plain podman commands, the way `docker compose up` reads it: one
 * network `<name>_default` on which each service is reachable by its name, named volumes `<name>_<volume>`,
 * services started in depends_on order and each condition waited for (service_started,
 * service_healthy through `podman healthcheck run`, service_completed_successfully through `podman wait`).
 * Debian's podman-compose 1.0.3 ignores those conditions and the top-level name, hence this reading.
 * test/unit/docker/compose-podman.test.ts checks that every key of every service becomes its flag.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse } from 'yaml';

export interface Healthcheck {
  test: string[];
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}

export interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  init?: boolean;
  restart?: string;
  read_only?: boolean;
  tmpfs?: string[];
  entrypoint?: string[];
  command?: string[];
  environment?: Record<string, string | number>;
  volumes?: string[];
  ports?: string[];
  hostname?: string;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: Healthcheck;
  stop_grace_period?: string;
}

export interface Compose {
  name: string;
  /** the folder of compose.yaml: relative paths (build context, bind mounts) start there */
  dir: string;
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
}

/** Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, $VAR, and $$ for a literal $. */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(
    /\$\$|\$\{(\w+)(?:(:?-)([^}]*))?\}|\$(\w+)/g,
    (all, name?: string, op?: string, fallback?: string, bare?: string) => {
      if (all === '$$') return '$';
      const key = (name ?? bare)!;
      const v = env[key];
      if (op === ':-') return v ? v : (fallback ?? '');
      if (op === '-') return v ?? fallback ?? '';
      return v ?? '';
    },
  );
}

function walk(value: unknown, env: Record<string, string | undefined>): unknown {
  if (typeof value === 'string') return interpolate(value, env);
  if (Array.isArray(value)) return value.map((v) => walk(v, env));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, env)]));
  return value;
}

/** compose.yaml with its anchors and merge keys resolved and the environment interpolated */
export function loadCompose(file: string, env: Record<string, string | undefined> = process.env): Compose {
  const raw = parse(readFileSync(file, 'utf8'), { merge: true, maxAliasCount: -1 }) as Omit<Compose, 'dir'>;
  const parsed = walk(raw, env) as Omit<Compose, 'dir'>;
  return { ...parsed, dir: dirname(resolve(file)), volumes: parsed.volumes ?? {} };
}

/** Services in an order where each comes after everything it depends on. */
export function startOrder(compose: Compose): string[] {
  const order: string[] = [];
  const visit = (name: string, path: string[]) => {
    if (order.includes(name)) return;
    if (path.includes(name)) throw new Error(`depends_on cycle: ${[...path, name].join(' -> ')}`);
    for (const dep of Object.keys(compose.services[name]?.depends_on ?? {})) visit(dep, [...path, name]);
    order.push(name);
  };
  for (const name of Object.keys(compose.services)) visit(name, []);
  return order;
}

export const containerName = (compose: Compose, service: string) => `${compose.name}-${service}-1`;
export const networkName = (compose: Compose) => `${compose.name}_default`;
export const volumeName = (compose: Compose, volume: string) => `${compose.name}_${volume}`;

/** "90s", "1m30s", "500ms" in seconds (podman's --stop-timeout takes whole seconds) */
export function seconds(duration: string): number {
  let total = 0;
  for (const [, n, unit] of duration.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g))
    total += Number(n) * { ms: 0.001, s: 1, m: 60, h: 3600 }[unit as 'ms' | 's' | 'm' | 'h'];
  return total;
}

/** "name:/path[:ro]" to a named volume of this project; "./file:/path[:ro]" to a bind mount from compose's folder */
function volumeFlag(compose: Compose, spec: string): string {
  const [source, ...rest] = spec.split(':');
  const from =
    source!.startsWith('.') || source!.startsWith('/') ? resolve(compose.dir, source!) : volumeName(compose, source!);
  return [from, ...rest].join(':');
}

/** the healthcheck's flags; "CMD" runs the list as given, "CMD-SHELL" through /bin/sh -c */
function healthFlags(h: Healthcheck): string[] {
  const [kind, ...args] = h.test;
  const cmd = kind === 'CMD-SHELL' ? args.join(' ') : JSON.stringify(args);
  if (kind !== 'CMD' && kind !== 'CMD-SHELL')
    throw new Error(`healthcheck test must start with CMD: ${h.test.join(' ')}`);
  return [
    `--health-cmd=${cmd}`,
    ...(h.interval ? [`--health-interval=${h.interval}`] : []),
    ...(h.timeout ? [`--health-timeout=${h.timeout}`] : []),
    ...(h.retries !== undefined ? [`--health-retries=${h.retries}`] : []),
    ...(h.start_period ? [`--health-start-period=${h.start_period}`] : []),
  ];
}

/** The arguments of `podman run` for one service (after `run`), in compose's terms. */
export function runArgs(compose: Compose, name: string): string[] {
  const s = compose.services[name];
  if (!s) throw new Error(`no service ${name} in compose.yaml`);
  const image = s.image ?? `${compose.name}-${name}`;
  const env = Object.entries(s.environment ?? {}).map(([k, v]) => `--env=${k}=${v}`);
  return [
    '--detach',
    `--name=${containerName(compose, name)}`,
    `--label=com.docker.compose.project=${compose.name}`,
    `--label=com.docker.compose.service=${name}`,
    `--network=${networkName(compose)}`,
    `--network-alias=${name}`,
    ...(s.hostname ? [`--hostname=${s.hostname}`] : []),
    ...(s.init ? ['--init'] : []),
    ...(s.restart ? [`--restart=${s.restart}`] : []),
    ...(s.read_only ? ['--read-only'] : []),
    ...(s.tmpfs ?? []).map((t) => `--tmpfs=${t}`),
    ...env,
    ...(s.volumes ?? []).map((v) => `--volume=${volumeFlag(compose, v)}`),
    ...(s.ports ?? []).map((p) => `--publish=${p}`),
    ...(s.healthcheck ? healthFlags(s.healthcheck) : []),
    ...(s.stop_grace_period ? [`--stop-timeout=${Math.ceil(seconds(s.stop_grace_period))}`] : []),
    ...(s.entrypoint ? [`--entrypoint=${JSON.stringify(s.entrypoint)}`] : []),
    image,
    ...(s.command ?? []),
  ];
}
