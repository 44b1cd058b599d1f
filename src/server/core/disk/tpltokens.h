/* E2B's upload URLs (GET /templates/{id}/files/{hash}): a one-use token
 * per file a tenant is to upload, which E2B's SDK PUTs to without its key.
 * Each tenant holds at most TPLTOKENS_TENANT of them at once; a token is
 * found by its own value, and those past their time are collected oldest
 * first, so that no request walks other tenants' tokens. */
#ifndef HUTCH_CORE_DISK_TPLTOKENS_H
#define HUTCH_CORE_DISK_TPLTOKENS_H

#include "err.h"

struct server;
struct tpltokens;

/* How long an upload URL stays good. */
#define TPLTOKENS_LIFE_MS (15 * 60 * 1000)
/* The tokens a tenant holds at once, unused and not yet expired: E2B's
 * SDK asks for one per COPY step of a build and uploads it at once. */
#define TPLTOKENS_TENANT 256

/* A token for the upload of tenant's file hash: 0 and out (40 hex
 * digits), or -1 and err (quota_exceeded past TPLTOKENS_TENANT). */
int tpltokens_issue(struct server *srv, const char *tenant, const char *hash, char out[41],
                    struct hutch_err *err);
/* The tenant and hash of token, if it is one still good, which is used up
 * by this: 0, or -1. */
int tpltokens_claim(struct server *srv, const char *token, char tenant[65], char hash[65]);
/* At stop: all of them (the tenants' counts go with the server). */
void tpltokens_free(struct tpltokens *t);

#endif
