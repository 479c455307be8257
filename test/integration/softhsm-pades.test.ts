/**
 * The pades.test.ts matrix again, with every key in a SoftHSM2 token (keys.provider softhsm: the issuing CA, TSA
 * and OCSP responder keys made by `qtsp pki init` in the token (the softhsm sandbox custody), each signer key generated in the token and
 * destroyed after its request), verified by the same independent tools. Its own process: the PKCS#11 module
 * reads SOFTHSM2_CONF once per initialisation.
 */
process.env['TEST_KEY_CUSTODY'] = 'softhsm';
await import('./pades.test.ts');
