/**
 * Journal format 3 against whoever can write the database, on SQLite and PostgreSQL: the signing entries carry
 * only the SHA-256 of the introspection JWT, the certificate, the signatures and the revocationInfo, which their
 * rows keep. Two real B-LT signings through the sandbox of the same document (so the attacker holds a second
 * bank-signed JWT, a second certificate of ours, a second valid signature over that document and other OCSP
 * responses), sealed; then, one at a time and set back after, the first signing's JWT row replaced by the
 * second's, its certificate row by the other certificate, its kept signature by the other signature, its
 * revocationInfo by the other one: each is a finding naming the row (`auditJournal`), and `qtsp evidence
 * record` says which handed-out file is not what its entry sealed.
 *
 * What an auditor with only the handed-out files and our root checks, with openssl and BouncyCastle: each entry
 * body's record against our root (ErsChecker.java), then entry body -> SHA-256 -> object, for every object
 * `qtsp evidence record` hands out.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { auditJournal, describeFinding } from '../../src/journal/audit.ts';
import { sqlitePath } from '../../src/store/open.ts';
import { startEnvironment, type TestEnvironment } from '../helpers/environment.ts';
import { assertIsIntrospectionResponse } from '../helpers/evidence.ts';
import { bouncyCastleVerdict, testTrust } from '../helpers/journal.ts';
import { run } from '../helpers/openssl.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { qtsp } from '../helpers/qtsp-cli.ts';
import { signaturesOf, signThroughSandbox } from '../helpers/signing.ts';

let postgres: PostgresServer | undefined;
before(async () => {
  postgres = await startPostgres();
});
after(async () => {
  await postgres?.stop();
});

/** SQL on the service's database beside it, as a database administrator runs it (`?` placeholders) */
interface Raw {
  run(sql: string, ...params: unknown[]): Promise<void>;
  one(sql: string, ...params: unknown[]): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

interface Dialect {
  readonly name: string;
  /** the environment's store settings, and SQL on its database once it runs */
  store(): Promise<{ config: Record<string, string>; cliEnv: Record<string, string> }>;
  raw(env: TestEnvironment): Promise<Raw>;
}

const sqlite: Dialect = {
  name: 'SQLite',
  store: async () => ({ config: {}, cliEnv: {} }),
  async raw(env) {
    const db = new Database(sqlitePath(env.dataDir));
    return {
      run: async (sql, ...params) => void db.prepare(sql).run(...params),
      one: async (sql, ...params) => db.prepare(sql).get(...params) as Record<string, unknown>,
      close: async () => void db.close(),
    };
  },
};

const postgresql: Dialect = {
  name: 'PostgreSQL',
  async store() {
    const url = await postgres!.freshSchemaUrl();
    return { config: { driver: 'postgres', url }, cliEnv: { QTSP_STORE_DRIVER: 'postgres', QTSP_STORE_URL: url } };
  },
  async raw(env) {
    const client = new pg.Client({ connectionString: env.config.store.url });
    await client.connect();
    const numbered = (sql: string) => {
      let n = 0;
      return sql.replace(/\?/g, () => `$${++n}`);
    };
    return {
      run: async (sql, ...params) => void (await client.query(numbered(sql), params)),
      one: async (sql, ...params) => (await client.query(numbered(sql), params)).rows[0],
      close: () => client.end(),
    };
  },
};

/** one B-LT signing of `hash` through the sandbox: its txn (captured from the AS's answer) and its signature */
async function signLt(env: TestEnvironment, hash: string): Promise<{ txn: string; serial: string; jwt: string }> {
  let txn: string | undefined;
  env.sandbox.controls.introspection.mutate = (payload) => {
    txn = String(payload.txn);
    return payload;
  };
  try {
    const res = await signThroughSandbox(env, [hash], { fields: { conformance_level: 'AdES-B-LT' } });
    assert.equal(signaturesOf(res).length, 1);
    assert.ok(res.body.revocationInfo?.ocsp?.length, 'B-LT returns revocationInfo');
  } finally {
    delete env.sandbox.controls.introspection.mutate;
  }
  const [stored] = await env.qtsp.deps.store.getTransaction(txn!);
  return { txn: txn!, serial: stored!.certificateSerialHex, jwt: stored!.introspectionJwt };
}

interface Forgery {
  readonly name: string;
  /** SQL that puts the second signing's object into the first signing's row, and SQL that sets it back */
  readonly table: string;
  readonly column: string;
  readonly where: string;
  readonly key: (a: Signed) => string;
  readonly expect: (a: Signed) => RegExp;
  /** the handed-out file `qtsp evidence record` names */
  readonly file: RegExp;
}

type Signed = Awaited<ReturnType<typeof signLt>> & { readonly hash: string };

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

const forgeries: Forgery[] = [
  {
    name: "the JWT row rewritten with another bank-signed JWT (the same bank's answer for another signing)",
    table: 'signing_transactions',
    column: 'introspection_jwt',
    where: 'certificate_serial_hex = ?',
    key: (a) => a.serial,
    expect: (a) => new RegExp(`altered: the stored evidence of signing ${a.serial} differs .*: introspection JWT$`),
    file: /introspection\.jwt: not what its sealed journal entry says/,
  },
  {
    name: 'the certificate row replaced with another certificate we issued',
    table: 'certificates',
    column: 'der',
    where: 'serial_hex = ?',
    key: (a) => a.serial,
    expect: (a) => new RegExp(`altered: the stored evidence of signing ${a.serial} differs .*: certificate$`),
    file: /certificate\.pem: not what its sealed journal entry says/,
  },
  {
    name: 'the kept signature swapped for another valid signature of the same document',
    table: 'signed_documents',
    column: 'signature',
    where: 'txn = ?',
    key: (a) => a.txn,
    expect: (a) =>
      new RegExp(`^signed_documents ${literal(a.txn)} ${literal(a.hash)}: differs from entry \\d+: signature$`),
    file: /signature-1\.p7s: not what its sealed journal entry says/,
  },
  {
    name: 'the revocationInfo changed to other real OCSP responses',
    table: 'signed_documents',
    column: 'revocation',
    where: 'txn = ?',
    key: (a) => a.txn,
    expect: (a) =>
      new RegExp(`^signed_documents ${literal(a.txn)} ${literal(a.hash)}: differs from entry \\d+: revocationInfo$`),
    file: /the revocationInfo of signature-1\.p7s: not what its sealed journal entry says/,
  },
];

/** the first signing's row takes the second signing's value of the same column */
async function forge(raw: Raw, f: Forgery, a: Signed, b: Signed): Promise<unknown> {
  const original = (await raw.one(`SELECT ${f.column} AS v FROM ${f.table} WHERE ${f.where}`, f.key(a))).v;
  const other = (await raw.one(`SELECT ${f.column} AS v FROM ${f.table} WHERE ${f.where}`, f.key(b))).v;
  assert.ok(original && other && String(original) !== String(other), `${f.column}: two different values`);
  await raw.run(`UPDATE ${f.table} SET ${f.column} = ? WHERE ${f.where}`, other, f.key(a));
  return original;
}

const findings = async (env: TestEnvironment) =>
  (await auditJournal(env.qtsp.deps.store, { trust: testTrust(env.dataDir) })).findings.map(describeFinding);

/** the auditor's check of what `qtsp evidence record` handed out: entry body -> SHA-256 -> object, and the records */
async function auditorChecks(dir: string, root: string, chain: string): Promise<void> {
  const files = readdirSync(dir);
  const entry = (kind: string) => {
    const name = files.find((f) => f.endsWith(`-${kind}.json`))!;
    return { name, data: JSON.parse(readFileSync(join(dir, name), 'utf8')).data };
  };
  const authorized = entry('signing.authorized');
  const returned = entry('signing.returned');
  const dgst = async (args: string[]) => {
    const r = await run('sh', ['-c', `${args.join(' ')} | openssl dgst -sha256 -r`]);
    assert.ok(r.ok, r.output);
    return r.output.split(' ')[0];
  };
  assert.equal(await dgst(['cat', join(dir, 'introspection.jwt')]), authorized.data.introspectionJwtSha256);
  const der = ['openssl', 'x509', '-in', join(dir, 'certificate.pem'), '-outform', 'DER'];
  assert.equal(await dgst(der), authorized.data.certificateSha256);
  assert.equal(await dgst(['cat', join(dir, 'signature-1.p7s')]), returned.data.signatures[0].signatureSha256);
  const info = files.find((f) => f.endsWith('.revocation-info.json'))!;
  assert.equal(await dgst(['cat', join(dir, info)]), returned.data.revocationInfoSha256);
  for (const e of [authorized, returned]) {
    const verdict = await bouncyCastleVerdict(join(dir, e.name.replace(/\.json$/, '.ers')), join(dir, e.name), {
      root,
      chain,
    });
    assert.ok(verdict.valid, verdict.output);
  }
  const group = files.find((f) => f.endsWith('.group.ers'))!;
  const both = [join(dir, authorized.name), join(dir, returned.name)];
  const verdict = await bouncyCastleVerdict(join(dir, group), both, { root, chain });
  assert.ok(verdict.valid, verdict.output);
}

function registerDigests(dialect: Dialect): void {
  describe(`journal format 3 against rewritten rows: ${dialect.name}`, () => {
    let env: TestEnvironment;
    let cliEnv: Record<string, string>;
    let raw: Raw;
    let a: Signed;
    let b: Signed;
    before(async () => {
      const store = await dialect.store();
      cliEnv = store.cliEnv;
      env = await startEnvironment({ store: store.config });
      raw = await dialect.raw(env);
      const hash = createHash('sha256').update(`a document ${Date.now()}`).digest('base64');
      a = { ...(await signLt(env, hash)), hash };
      b = { ...(await signLt(env, hash)), hash };
      await env.qtsp.sealJournal();
    });
    after(async () => {
      await raw?.close();
      await env?.close();
    });

    const record = (out: string) =>
      qtsp(['evidence', 'record', a.txn, '--out', out, '--data-dir', env.dataDir], cliEnv);

    it('hands out the objects its entries name by digest; openssl and BouncyCastle check them', async () => {
      assert.deepEqual(await findings(env), []);
      await assertIsIntrospectionResponse(
        env,
        b.jwt,
        JSON.parse(Buffer.from(b.jwt.split('.')[1]!, 'base64url').toString()),
      );
      const out = join(env.dataDir, 'records-clean');
      const written = await record(out);
      assert.equal(written.code, 0, written.output);
      await auditorChecks(join(out, a.serial), env.rootCaFile, join(out, 'tsa-chain.pem'));
      const body = readFileSync(
        join(out, a.serial, readdirSync(join(out, a.serial)).find((f) => f.endsWith('-signing.authorized.json'))!),
        'utf8',
      );
      assert.equal(body.includes(a.jwt), false, 'the entry holds no copy of the JWT');
      assert.match(body, /"v":3}$/);
    });

    for (const f of forgeries)
      it(`names ${f.name}`, async () => {
        const original = await forge(raw, f, a, b);
        try {
          const lines = await findings(env);
          assert.ok(
            lines.some((l) => f.expect(a).test(l)),
            `no finding matches ${f.expect(a)}:\n${lines.join('\n')}`,
          );
          const written = await record(join(env.dataDir, `records-${f.column}`));
          assert.equal(written.code, 1, written.output);
          assert.match(written.stderr, f.file);
        } finally {
          await raw.run(`UPDATE ${f.table} SET ${f.column} = ? WHERE ${f.where}`, original, f.key(a));
        }
        assert.deepEqual(await findings(env), [], 'clean again once set back');
      });
  });
}

registerDigests(sqlite);
registerDigests(postgresql);
