/*
 * The crypto library (libgcrypt; docs/encryption.md says why this one):
 * its one-time initialisation, which every crypto/ entry point makes
 * before its first call into the library.
 */
#ifndef QBLOCK_CRYPTO_INIT_H
#define QBLOCK_CRYPTO_INIT_H

/*
 * Initialises libgcrypt once per process, from any thread.  Its secure
 * memory pool is left off: qblock zeroes key material itself, and the
 * pool's fixed size would make many open images fail.
 */
void crypto_init(void);

#endif
