/**
 * The issuing-ca-rollover.test.ts rollover again, with the long-lived keys in a SoftHSM2 token (keys.provider
 * softhsm): the new CA and responder keys are made in the token, the retired ones kept under their generation's
 * label, and the destroyed key is gone from the token (pkcs11-tool). Its own process: the PKCS#11 module reads
 * SOFTHSM2_CONF once per initialisation.
 */
process.env['TEST_KEY_CUSTODY'] = 'softhsm';
await import('./issuing-ca-rollover.test.ts');
