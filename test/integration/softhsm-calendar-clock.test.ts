/**
 * The calendar-clock.test.ts clock test again, with the issuing CA, TSA and OCSP responder keys in a SoftHSM2
 * token (keys.provider softhsm). Its own process: the PKCS#11 module reads SOFTHSM2_CONF once per initialisation.
 */
process.env['TEST_KEY_CUSTODY'] = 'softhsm';
await import('./calendar-clock.test.ts');
