/*
 * The tls-cipher-suites object type (--object, object-add): the TLS
 * cipher suites a GnuTLS priority string allows, as the IANA registry
 * numbers them (two bytes each, most preferred first).  QEMU hands that
 * list to guest firmware (fw_cfg etc/edk2/https/ciphers) so that the
 * guest's HTTPS boot offers what the host's policy allows; qblock has
 * no guest, and shows it with qom-get of "cipher-suites".
 */
#ifndef QBLOCK_CRYPTO_TLS_CIPHER_SUITES_H
#define QBLOCK_CRYPTO_TLS_CIPHER_SUITES_H

#include "util/osdep.h"
#include "util/error.h"

/*
 * The cipher suites @priority allows, in GnuTLS's order of preference:
 * each suite's two IANA bytes, the first byte first.  NULL with QEMU's
 * message ("Syntax error using priority 'P': REASON") if GnuTLS refuses
 * the string.
 */
GByteArray *qcrypto_tls_cipher_suites_compute(const char *priority,
                                              Error **errp);

#endif
