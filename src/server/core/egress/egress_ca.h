/* A sandbox's egress CA (egress_ca.c): an EC P-256 key that never leaves
 * the server's memory, its certificate, which the sandbox trusts
 * (egress_trust.c), and the one key of every leaf it signs, one leaf per
 * intercepted connection (egress_tls.c), for the host the sandbox asked
 * for. */
#ifndef HUTCH_CORE_EGRESS_EGRESS_CA_H
#define HUTCH_CORE_EGRESS_EGRESS_CA_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include "err.h"

struct tls_ca {
  EVP_PKEY *key; /* the CA's */
  X509 *cert;
  EVP_PKEY *leaf_key; /* every leaf's: one per CA, made with it */
  char *pem;
};

/* A leaf for host (a name, or an address) with leaf_key, signed by the
 * CA (ca_cert, ca_key), for a week; NULL when it could not be made. */
X509 *egress_ca_leaf(const char *host, EVP_PKEY *leaf_key, X509 *ca_cert, EVP_PKEY *ca_key);

/* A sandbox's CA, its certificate as PEM, and its end. */
struct tls_ca *egress_ca_new(const char *sandbox, struct hutch_err *err);
const char *egress_ca_pem(const struct tls_ca *ca);
void egress_ca_free(struct tls_ca *ca);

#endif
