/**
 * The request vocabulary of signDoc (spec 2.12): signature_format (C = CAdES, X = XAdES, P = PAdES) and
 * conformance_level. Here, below both signing/ (which parses requests) and the ades/ builders (which are
 * registered per format and level), so neither has to import the other for it.
 */
export const SIGNATURE_FORMATS = ['C', 'X', 'P'] as const;
export type SignatureFormat = (typeof SIGNATURE_FORMATS)[number];

export const CONFORMANCE_LEVELS = ['AdES-B-B', 'AdES-B-T', 'AdES-B-LT', 'AdES-B-LTA'] as const;
export type ConformanceLevel = (typeof CONFORMANCE_LEVELS)[number];
