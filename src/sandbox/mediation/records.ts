/**
 * What the sandbox mediation service accepts: the QTSP record remote_signature_creation with exactly the
 * fields of spec 6.2, checked strictly so that a QTSP sending a wrong or extra field learns it here and not
 * from a billing dispute. The envelope {type, record} is ours (spec 4.7: the envelope is not shown).
 */
import { z } from 'zod';

const referenceId = z
  .string()
  .regex(/^[A-Za-z0-9-]{1,100}$/, 'must be 1 to 100 characters of a-z, A-Z, 0-9 and dash (spec 6.2)');
const claimRequest = z.union([z.null(), z.strictObject({ essential: z.literal(true) })]);

export const remoteSignatureCreationSchema = z
  .strictObject({
    delivery_time: z.iso.datetime({ offset: true }),
    transaction_id: z.string().min(1),
    owner_id: z.string().min(1),
    credentialID: z.literal('qes_eidas'),
    count: z.number().int().min(0),
    service_provider_id: z.string().min(1),
    client_id: z.string().min(1),
    issuer: z.url(),
    reference_id: referenceId,
    requested_claims: z
      .strictObject({ verified_claims: z.strictObject({ claims: z.record(z.string(), claimRequest) }) })
      .optional(),
    provided_claim_names: z
      .array(
        z
          .string()
          .regex(/^verified_claims\/claims\/[A-Za-z0-9_/]+$/, 'must be named verified_claims/claims/<name> (spec 6.2)'),
      )
      .optional(),
  })
  .refine((r) => (r.requested_claims === undefined) === (r.provided_claim_names === undefined), {
    message: 'requested_claims and provided_claim_names come together (QESID) or not at all',
  });

export type RemoteSignatureCreation = z.infer<typeof remoteSignatureCreationSchema>;

export const envelopeSchema = z.strictObject({
  type: z.literal('remote_signature_creation', {
    message: 'this sandbox mediation service takes QTSP records (type remote_signature_creation) only',
  }),
  record: remoteSignatureCreationSchema,
});

export interface StoredRecord {
  readonly type: 'remote_signature_creation';
  readonly record: RemoteSignatureCreation;
  readonly receivedAt: Date;
}

/** One readable line per problem: "record.count: ..." */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`).join('; ');
}

/** Records in memory, unique by reference_id in the scope service_provider_id + issuer (spec 6.2). */
export class RecordStore {
  private readonly list: StoredRecord[] = [];
  private readonly keys = new Set<string>();

  static scopeKey(r: RemoteSignatureCreation): string {
    return JSON.stringify([r.service_provider_id, r.issuer, r.reference_id]);
  }

  /** false when the reference_id already exists in its scope */
  add(type: 'remote_signature_creation', record: RemoteSignatureCreation): boolean {
    const key = RecordStore.scopeKey(record);
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    this.list.push({ type, record, receivedAt: new Date() });
    return true;
  }

  all(): readonly StoredRecord[] {
    return [...this.list];
  }

  clear(): void {
    this.list.length = 0;
    this.keys.clear();
  }
}
