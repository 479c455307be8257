/**
 * The calendar-renewal.test.ts renewal again, with the issuing CA, TSA and OCSP responder keys in a SoftHSM2
 * token (keys.provider softhsm): the ceremony renews the root CRL and makes the fresh TSU and responder keys in
 * the token.
 * Its own process: the PKCS#11 module reads SOFTHSM2_CONF once per initialisation.
 */
process.env['TEST_KEY_CUSTODY'] = 'softhsm';
await import('./calendar-renewal.test.ts');
