/* A sandbox's egress secrets, as netpolicy_parse reads them (netpolicy.h
 * says what a secret is and where it may go). */
#ifndef HUTCH_NET_NPSECRETS_H
#define HUTCH_NET_NPSECRETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/netpolicy.h"

/* network.secrets (secrets, may be NULL) into out's secrets; -1 with why
 * filled when one is malformed. */
int npsecrets_parse(json_t *secrets, struct netpolicy *out, char *why, size_t whylen);
/* Whether port is among ports[0..n). */
bool npsecrets_port_in(const uint16_t *ports, size_t n, uint16_t port);

#endif
