/**
 * How many documents one signing may cover: the hashes of one signDoc request, and so the documents one consent
 * at the bank may list (spec 8 leaves request size limits to the parties). Defined here only: the SignDocRequest
 * schema of openapi.yaml states it as maxItems (request.ts refuses to load when the two differ), and our record
 * in the SP directory publishes it, from which a bank refuses a longer list already at its PAR (spec 2.13, 2.2).
 */
export const MAX_DOCUMENTS_PER_SIGNING = 100;
