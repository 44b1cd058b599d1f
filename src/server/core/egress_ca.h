/* A sandbox's egress CA (egress_tls.h has what the rest of the server
 * uses: tls_ca_new, tls_ca_pem, tls_ca_free): an EC P-256 key that never
 * leaves the server's memory, its certificate, and the one key of every
 * leaf it signs, one leaf per intercepted connection, for the host the
 * sandbox asked for. Shared with egress_tls.c only. */
#ifndef HUTCH_CORE_EGRESS_CA_H
#define HUTCH_CORE_EGRESS_CA_H

#include <openssl/evp.h>
#include <openssl/x509.h>

struct tls_ca {
  EVP_PKEY *key; /* the CA's */
  X509 *cert;
  EVP_PKEY *leaf_key; /* every leaf's: one per CA, made with it */
  char *pem;
};

/* A leaf for host (a name, or an address) with leaf_key, signed by the
 * CA (ca_cert, ca_key), for a week; NULL when it could not be made. */
X509 *egress_ca_leaf(const char *host, EVP_PKEY *leaf_key, X509 *ca_cert, EVP_PKEY *ca_key);

#endif
