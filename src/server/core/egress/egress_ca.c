/* A sandbox's egress CA, and the leaves it signs (egress_ca.h). */
#include "core/egress/egress_ca.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "util.h"

static EVP_PKEY *new_key(void) {
  return EVP_EC_gen("P-256");
}

struct ext {
  int nid;
  const char *value;
};

static bool add_ext(X509 *c, X509 *issuer, int nid, const char *value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, c, NULL, NULL, 0);
  X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
  bool ok = e && X509_add_ext(c, e, -1) == 1;
  X509_EXTENSION_free(e);
  return ok;
}

/* A certificate for subject cn with key, issued by issuer (NULL: itself)
 * whose key is ikey, valid from an hour ago for days, with exts (ending
 * with nid 0) and the key identifiers strict verifiers want. */
static X509 *new_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *ikey, long days,
                      const struct ext *exts) {
  X509 *c = X509_new();
  if (!c)
    goto fail;

  /* A random serial number, positive. */
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1)
    goto fail;
  serial[0] &= 0x7f;
  BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
  bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c));
  BN_free(bn);
  if (!ok)
    goto fail;

  if (X509_set_version(c, 2) != 1)
    goto fail;
  if (!X509_gmtime_adj(X509_getm_notBefore(c), -3600))
    goto fail;
  if (!X509_gmtime_adj(X509_getm_notAfter(c), days * 86400))
    goto fail;
  if (X509_set_pubkey(c, key) != 1)
    goto fail;

  /* A commonName holds 64 bytes at most (a host name may be longer):
   * clients check a leaf's SAN, the CN only names it. */
  X509_NAME *name = X509_get_subject_name(c);
  int cn_len = (int)(strlen(cn) > 64 ? 64 : strlen(cn));
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, cn_len, -1,
                                 0) != 1)
    goto fail;
  if (X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name) != 1)
    goto fail;

  X509 *iss = issuer ? issuer : c;
  if (!add_ext(c, iss, NID_subject_key_identifier, "hash"))
    goto fail;
  if (!add_ext(c, iss, NID_authority_key_identifier, "keyid:always"))
    goto fail;
  for (const struct ext *x = exts; x->nid; x++)
    if (!add_ext(c, iss, x->nid, x->value))
      goto fail;

  if (X509_sign(c, ikey ? ikey : key, EVP_sha256()) <= 0)
    goto fail;
  return c;

fail:
  X509_free(c);
  return NULL;
}

struct tls_ca *egress_ca_new(const char *sandbox, struct hutch_err *err) {
  static const struct ext exts[] = {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                    {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                    {0, NULL}};
  struct tls_ca *ca = xcalloc(1, sizeof *ca);
  char cn[96];
  snprintf(cn, sizeof cn, "hutch egress CA (sandbox %s)", sandbox);
  ca->key = new_key();
  ca->leaf_key = new_key();
  if (!ca->key || !ca->leaf_key)
    goto fail;

  /* Ten years: the CA lives as long as the sandbox (a new one with each
   * sandbox, and with each start of the server). */
  ca->cert = new_cert(cn, ca->key, NULL, NULL, 3650, exts);
  if (!ca->cert)
    goto fail;

  BIO *b = BIO_new(BIO_s_mem());
  if (!b || PEM_write_bio_X509(b, ca->cert) != 1) {
    BIO_free(b);
    goto fail;
  }
  char *data;
  long n = BIO_get_mem_data(b, &data);
  ca->pem = xmalloc((size_t)n + 1);
  memcpy(ca->pem, data, (size_t)n);
  ca->pem[n] = '\0';
  BIO_free(b);
  return ca;

fail:
  ERR_clear_error();
  egress_ca_free(ca);
  hutch_err_set(err, 0, "making the egress CA of sandbox %s", sandbox);
  return NULL;
}

const char *egress_ca_pem(const struct tls_ca *ca) {
  return ca->pem;
}

void egress_ca_free(struct tls_ca *ca) {
  if (!ca)
    return;
  EVP_PKEY_free(ca->key);
  EVP_PKEY_free(ca->leaf_key);
  X509_free(ca->cert);
  free(ca->pem);
  free(ca);
}

X509 *egress_ca_leaf(const char *host, EVP_PKEY *leaf_key, X509 *ca_cert, EVP_PKEY *ca_key) {
  bool ip = strchr(host, ':') || strspn(host, "0123456789.") == strlen(host);
  char san[300];
  snprintf(san, sizeof san, "%s:%s", ip ? "IP" : "DNS", host);
  const struct ext exts[] = {{NID_basic_constraints, "critical,CA:FALSE"},
                             {NID_key_usage, "critical,digitalSignature"},
                             {NID_ext_key_usage, "serverAuth"},
                             {NID_subject_alt_name, san},
                             {0, NULL}};
  return new_cert(host, leaf_key, ca_cert, ca_key, 7, exts);
}
