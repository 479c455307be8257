#!/usr/bin/env node
// The Debian packages a project command needs, installed when missing, so that `npm install && npm start` and
// `npm test` are all a fresh Debian machine with Node.js 20 needs (README: Quick start).
//
//   node scripts/ensure-packages.mjs start|test|ha [--check]
//
// Each package is probed by what we run from it (a command on PATH, or the file Debian installs outside PATH).
// Nothing missing: silent, exit 0. Something missing and running as root: `apt-get update` and
// `apt-get install -y --no-install-recommends PKG...`, then probe again. Missing and not root (or --check):
// print the one command to run and exit 1. Plain JavaScript on purpose: it runs before anything else, without
// tsx, and needs nothing but node.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** where a command of a package may live besides PATH (Debian puts daemons in /usr/sbin, outside a user's PATH) */
const SBIN = ['/usr/sbin', '/sbin'];

function onPath(command, extraDirs = []) {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...extraDirs];
  return dirs.some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Debian's PostgreSQL server binaries live in /usr/lib/postgresql/<version>/bin (test/helpers/postgres.ts) */
function postgresServerInstalled() {
  const root = '/usr/lib/postgresql';
  const versioned = existsSync(root) && readdirSync(root).some((v) => existsSync(join(root, v, 'bin', 'initdb')));
  return versioned || onPath('initdb');
}

/** Debian package -> how we tell it is installed, and why the project needs it */
const PACKAGES = {
  'redis-server': {
    present: () => onPath('redis-server'),
    why: 'local Redis of the delivery queues (qtsp dev, tests)',
  },
  git: {
    present: () => onPath('git'),
    why: 'git http-backend serves the journal anchor repository (qtsp serve) and the sandbox key archive',
  },
  openssl: { present: () => onPath('openssl'), why: 'independent check of CMS, time-stamps, OCSP, CRLs' },
  gnupg: { present: () => onPath('gpg'), why: 'tests: independent check of the key archive commit signatures' },
  postgresql: { present: postgresServerInstalled, why: 'tests: the PostgreSQL store and several instances' },
  'poppler-utils': { present: () => onPath('pdfsig'), why: 'independent check of PAdES signatures (pdfsig)' },
  xmlsec1: { present: () => onPath('xmlsec1'), why: 'independent check of XAdES signatures' },
  'libnss3-tools': { present: () => onPath('certutil'), why: 'NSS trust store for pdfsig (certutil)' },
  softhsm2: { present: () => onPath('softhsm2-util'), why: 'tests: a PKCS#11 token (SoftHSM2)' },
  opensc: { present: () => onPath('pkcs11-tool'), why: 'tests: independent look at the PKCS#11 token (pkcs11-tool)' },
  chromium: { present: () => onPath('chromium'), why: 'tests: the sandbox pages in a real browser (playwright-core)' },
  'libbcpkix-java': {
    present: () => existsSync('/usr/share/java/bcpkix.jar'),
    why: 'tests: BouncyCastle checks our RFC 4998 evidence records (test/oracles/ErsChecker.java)',
  },
  'default-jdk-headless': {
    present: () => onPath('java') && onPath('javac'),
    why: 'tests: compiles and runs the BouncyCastle evidence-record check',
  },
  faketime: {
    present: () => onPath('faketime'),
    why: 'tests: the service and the validators with the clock moved years on (libfaketime)',
  },
  haproxy: {
    present: () => onPath('haproxy', SBIN),
    why: 'tests: the layer-4 load balancer in front of several instances',
  },
  prometheus: {
    present: () => onPath('promtool') && onPath('prometheus'),
    why: 'tests: the shipped alert rules checked and evaluated by promtool, and scraped by a real Prometheus',
  },
  'etcd-server': { present: () => onPath('etcd'), why: 'test:ha: the DCS that Patroni keeps its leader key in' },
  patroni: { present: () => onPath('patroni'), why: 'test:ha: PostgreSQL with a synchronous standby and failover' },
  'python3-etcd': {
    present: () => existsSync('/usr/lib/python3/dist-packages/etcd/__init__.py'),
    why: "test:ha: Patroni's etcd client",
  },
};

/** what `npm run test:ha` needs beyond `npm test`: Patroni, etcd (redis-server runs Sentinel itself) */
const HA = ['etcd-server', 'patroni', 'python3-etcd'];

const DEMO_VALIDATORS = ['openssl', 'xmlsec1', 'poppler-utils', 'libnss3-tools'];

/**
 * what each command needs: `npm start` needs no redis-server when a Redis is configured, and SoftHSM2 only
 * with the sandbox's HSM switch (QTSP_KEYS_PROVIDER=softhsm)
 */
function needed(command, env) {
  switch (command) {
    case 'start':
      return [
        ...(env.REDIS_URL || env.QTSP_REDIS_URL ? [] : ['redis-server']),
        'git',
        // the demo relying party shows each signature's verdict from these validators
        ...DEMO_VALIDATORS,
        ...(env.QTSP_KEYS_PROVIDER === 'softhsm' ? ['softhsm2'] : []),
      ];
    case 'test':
      return Object.keys(PACKAGES).filter((name) => !HA.includes(name));
    case 'ha':
      return Object.keys(PACKAGES);
    default:
      return undefined;
  }
}

function run(cmd, args) {
  process.stdout.write(`ensure-packages: ${cmd} ${args.join(' ')}\n`);
  const result = spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${cmd} ${args[0]} exited with ${result.status ?? result.signal}`);
}

function main(argv) {
  const command = argv.find((a) => !a.startsWith('--'));
  const checkOnly = argv.includes('--check');
  const packages = needed(command, process.env);
  if (!packages) {
    process.stderr.write('usage: node scripts/ensure-packages.mjs start|test|ha [--check]\n');
    return 2;
  }
  const missing = packages.filter((name) => !PACKAGES[name].present());
  if (missing.length === 0) return 0;
  const install = ['install', '-y', '--no-install-recommends', ...missing];
  const list = missing.map((name) => `  ${name}: ${PACKAGES[name].why}`).join('\n');
  if (checkOnly || process.getuid?.() !== 0 || !onPath('apt-get', SBIN)) {
    process.stderr.write(
      `npm ${command} needs these Debian packages, which are not installed:\n${list}\n` +
        `install them with (as root):\n  apt-get update && apt-get ${install.join(' ')}\n`,
    );
    return 1;
  }
  process.stdout.write(`ensure-packages: npm ${command} needs, and will now install:\n${list}\n`);
  try {
    run('apt-get', ['update', '-q']);
    run('apt-get', ['-q', ...install]);
  } catch (err) {
    process.stderr.write(`ensure-packages: ${err.message}\n`);
    return 1;
  }
  const still = missing.filter((name) => !PACKAGES[name].present());
  if (still.length) {
    process.stderr.write(`ensure-packages: still missing after apt-get install: ${still.join(', ')}\n`);
    return 1;
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
