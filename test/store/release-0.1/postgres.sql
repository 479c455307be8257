-- The PostgreSQL store of release fdcfad6 (schema version 2): its MIGRATIONS 1 and 2 verbatim, the versions it
-- recorded, and the rows of rows.ts as that release wrote them. Applied in an empty schema (search_path).

  CREATE TABLE certificates (
    serial_hex        TEXT PRIMARY KEY CHECK (serial_hex ~ '^[0-9a-f]+$'),
    issuer_key_id     TEXT NOT NULL CHECK (issuer_key_id ~ '^[0-9a-f]+$'),
    subject           TEXT NOT NULL,
    not_before        TIMESTAMPTZ NOT NULL,
    not_after         TIMESTAMPTZ NOT NULL,
    issued_at         TIMESTAMPTZ NOT NULL,
    txn               TEXT,
    der               BYTEA NOT NULL CHECK (length(der) > 0),
    status            TEXT NOT NULL DEFAULT 'good' CHECK (status IN ('good', 'revoked')),
    revoked_at        TIMESTAMPTZ,
    revocation_reason TEXT,
    CHECK ((status = 'good') = (revoked_at IS NULL AND revocation_reason IS NULL))
  );
  CREATE INDEX certificates_issuer_status ON certificates (issuer_key_id, status);
  CREATE INDEX certificates_txn ON certificates (txn);

  CREATE TABLE signing_transactions (
    certificate_serial_hex TEXT PRIMARY KEY REFERENCES certificates (serial_hex),
    txn                    TEXT NOT NULL CHECK (length(txn) > 0),
    iss                    TEXT NOT NULL,
    sub                    TEXT NOT NULL,
    client_id              TEXT NOT NULL,
    client_state           TEXT NOT NULL,
    introspection_jwt      TEXT NOT NULL CHECK (length(introspection_jwt) > 0),
    hash_algorithm_oid     TEXT NOT NULL,
    hashes                 TEXT NOT NULL,
    hash_count             INTEGER NOT NULL,
    signature_format       TEXT NOT NULL,
    conformance_level      TEXT NOT NULL,
    created_at             TIMESTAMPTZ NOT NULL,
    seq                    BIGINT GENERATED ALWAYS AS IDENTITY
  );
  CREATE INDEX signing_transactions_txn ON signing_transactions (txn, created_at);

  CREATE TABLE outbox (
    id         TEXT PRIMARY KEY CHECK (length(id) > 0),
    topic      TEXT NOT NULL CHECK (length(topic) > 0),
    payload    TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'queued', 'delivered', 'failed')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    seq        BIGINT GENERATED ALWAYS AS IDENTITY
  );
  CREATE INDEX outbox_topic_state ON outbox (topic, state, created_at, seq);

ALTER TABLE signing_transactions ADD COLUMN key_source TEXT;

CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL);
INSERT INTO schema_version (version, applied_at) VALUES (1, '2026-10-01T00:00:00Z'), (2, '2026-10-20T00:00:00Z');

INSERT INTO certificates (serial_hex, issuer_key_id, subject, not_before, not_after, issued_at, txn, der) VALUES
  ('4a1112131415161718191a1b1c1d1e1f', 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678', 'C=DE, GN=Erika, SN=Mustermann, CN=Erika Mustermann',
   '2026-11-01T09:59:00.000Z', '2026-11-01T11:00:00.000Z', '2026-10-31T08:00:00.456Z', 'txn-release-0.1', '\x3003020102'),
  ('4a0102030405060708090a0b0c0d0e0f', 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678', 'C=DE, GN=Erika, SN=Mustermann, CN=Erika Mustermann',
   '2026-11-01T09:59:00.000Z', '2026-11-01T11:00:00.000Z', '2026-11-01T10:00:00.123Z', 'txn-release-0.1', '\x3003020101'),
  ('4b02', 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678', 'CN=Sandbox TSA',
   '2026-11-01T09:59:00.000Z', '2026-11-01T11:00:00.000Z', '2026-11-01T10:00:00.123Z', NULL, '\x3003020103');
UPDATE certificates SET status = 'revoked', revoked_at = '2026-11-02T00:00:00.000Z', revocation_reason = 'keyCompromise' WHERE serial_hex = '4b02';

INSERT INTO signing_transactions (certificate_serial_hex, txn, iss, sub, client_id, client_state, introspection_jwt,
    hash_algorithm_oid, hashes, hash_count, signature_format, conformance_level, key_source, created_at) VALUES
  ('4a1112131415161718191a1b1c1d1e1f', 'txn-release-0.1', 'https://bank.sandbox.localhost', 'user-4711', 'rp-1', 'active',
   'eyJhbGciOiJSUzI1NiJ9.eyJ0eG4iOiJ0eG4tcmVsZWFzZS0wLjEifQ.c2ln', '2.16.840.1.101.3.4.2.1',
   '["bWFkZSB1cCBoYXNoIDEgKDMyIGJ5dGVzKSAuLi4uLi4=","bWFkZSB1cCBoYXNoIDIgKDMyIGJ5dGVzKSAuLi4uLi4="]', 2, 'C', 'AdES-B-B', NULL,
   '2026-10-31T08:00:00.456Z'),
  ('4a0102030405060708090a0b0c0d0e0f', 'txn-release-0.1', 'https://bank.sandbox.localhost', 'user-4711', 'rp-1', 'active',
   'eyJhbGciOiJSUzI1NiJ9.eyJ0eG4iOiJ0eG4tcmVsZWFzZS0wLjEifQ.c2lnMg', '2.16.840.1.101.3.4.2.1',
   '["bWFkZSB1cCBoYXNoIDMgKDMyIGJ5dGVzKSAuLi4uLi4="]', 1, 'P', 'AdES-B-T', 'archive 40086f43360c18039c12f103cc000256989e31ed',
   '2026-11-01T10:00:00.123Z');

INSERT INTO outbox (id, topic, payload, created_at, updated_at) VALUES
  ('ref-release-1', 'mediation', '{"type":"remote_signature_creation","text":"Ünïcödé ✓"}', '2026-11-01T10:00:00.123Z', '2026-11-01T10:00:00.123Z'),
  ('ref-release-2', 'mediation', '{"n":2}', '2026-11-01T10:00:01.000Z', '2026-11-01T10:00:01.000Z');
UPDATE outbox SET state = 'delivered', attempts = 1, last_error = 'mediation service answered 503', updated_at = '2026-11-01T10:00:02.000Z'
  WHERE id = 'ref-release-2';
