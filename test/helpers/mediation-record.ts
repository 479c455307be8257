/**
 * The fields of a remote_signature_creation record (spec 6.2), written out here as the spec lists them, sorted:
 * what the record builder and the records the sandbox's mediation service receives are held to.
 */
export const REMOTE_SIGNATURE_CREATION_FIELDS: readonly string[] = [
  'client_id',
  'count',
  'credentialID',
  'delivery_time',
  'issuer',
  'owner_id',
  'reference_id',
  'service_provider_id',
  'transaction_id',
];
