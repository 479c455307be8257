/**
 * The store contract on PostgreSQL: a real server from Debian's packages in a temp dir on a free loopback port
 * (test/helpers/postgres.ts; POSTGRES_URL to use another), each store in a fresh schema. Missing PostgreSQL
 * binaries fail this file: nothing is skipped. Plus what only PostgreSQL has: instances migrating at the same
 * time, and signDoc end to end with store.driver postgres; and a schema written by release 0.1 migrating
 * forward with its rows.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { readFileSync } from 'node:fs';
import { openPostgresStore, openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/types.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { registerReleaseMigration } from '../store/release-0.1/migration.ts';
import { MIGRATIONS, registerStoreContract, signing } from '../store/store-contract.ts';
import { registerDocumentsContract } from '../store/documents-contract.ts';
import { registerJournalContract } from '../store/journal-contract.ts';
import { startEnvironment } from '../helpers/environment.ts';
import { assertIsIntrospectionResponse, signAndCapture, signerSerialByOpenssl } from '../helpers/evidence.ts';

let started: PostgresServer | undefined;
let unavailable: Error | undefined;
before(async () => {
  try {
    started = await startPostgres();
  } catch (err) {
    unavailable = err as Error; // reported by every test below, so the failure shows in the counts
  }
});
after(async () => {
  await started?.stop();
});

function server(): PostgresServer {
  if (!started) throw unavailable ?? new Error('PostgreSQL did not start');
  return started;
}

it('a real PostgreSQL server runs for these tests', () => {
  server();
});

registerStoreContract('postgres', {
  location: () => server().freshSchemaUrl(),
  open: (url) => openPostgresStore({ url }),
});

registerJournalContract('postgres', {
  location: () => server().freshSchemaUrl(),
  open: (url) => openPostgresStore({ url }),
});

registerDocumentsContract('postgres', {
  location: () => server().freshSchemaUrl(),
  open: (url) => openPostgresStore({ url }),
});

registerReleaseMigration('postgres', {
  location: async () => {
    const url = await server().freshSchemaUrl();
    await query(url, readFileSync(new URL('../store/release-0.1/postgres.sql', import.meta.url), 'utf8'));
    return url;
  },
  open: (url) => openPostgresStore({ url }),
});

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

describe('PostgreSQL store schema', () => {
  it('instances opening at the same time migrate once; a newer schema is refused', async () => {
    const url = await server().freshSchemaUrl();
    const stores: Store[] = await Promise.all(
      [1, 2, 3].map(() =>
        openStore({ dataDir: '/nonexistent', store: { driver: 'postgres', url, pingIntervalMs: 1000 } }),
      ),
    );
    await stores[0]!.recordSigning(signing('txn-pg-shared'));
    assert.equal((await stores[2]!.getTransaction('txn-pg-shared')).length, 1, 'every instance sees the same data');
    for (const s of stores) await s.close();
    assert.deepEqual(await query(url, 'SELECT name FROM kysely_migration ORDER BY name'), MIGRATIONS);
    await query(url, "INSERT INTO kysely_migration (name, timestamp) VALUES ('0099_from_the_future', now()::text)");
    await assert.rejects(
      openPostgresStore({ url }),
      /migration 0099_from_the_future\) is newer than this program knows/,
    );
  });

  it('an unreachable server fails the open with a clear error', async () => {
    await assert.rejects(openPostgresStore({ url: 'postgres://postgres@127.0.0.1:1/none' }), /ECONNREFUSED/);
  });
});

describe('signDoc with store.driver postgres', () => {
  it('records the transaction and the certificate in PostgreSQL', async () => {
    const url = await server().freshSchemaUrl();
    const env = await startEnvironment({ store: { driver: 'postgres', url } });
    try {
      const signed = await signAndCapture(env);
      assert.equal(signed.status, 200, JSON.stringify(signed.body));
      const serial = await signerSerialByOpenssl(
        Buffer.from(signed.body.SignatureObject![0]!, 'base64'),
        signed.document,
        env.rootCaFile,
      );
      const rows = await query<{
        txn: string;
        introspection_jwt: string;
        certificate_serial_hex: string;
        status: string;
      }>(
        url,
        'SELECT t.txn, t.introspection_jwt, t.certificate_serial_hex, c.status FROM signing_transactions t JOIN certificates c ON c.serial_hex = t.certificate_serial_hex',
      );
      assert.equal(rows.length, 1);
      assert.deepEqual(
        { ...rows[0], introspection_jwt: undefined },
        { txn: signed.txn, certificate_serial_hex: serial, status: 'good', introspection_jwt: undefined },
      );
      await assertIsIntrospectionResponse(env, rows[0]!.introspection_jwt, signed.introspectionPayload);
    } finally {
      await env.close();
    }
  });
});
