/* envd's signed /files URLs (signing.c): a request's signature checked,
 * and the sandbox a URL that names none was signed for. */
#ifndef HUTCH_E2B_SIGNING_H
#define HUTCH_E2B_SIGNING_H

struct sbx;
struct http_conn;

/* 1: the request's signature (signature=) is sb's and in time; 0: it has
 * none; -1 after a 401. */
int e2b_signature_check(struct http_conn *c, const struct sbx *sb);
/* The sandbox whose access token signed the request (a URL that names no
 * sandbox), woken if paused; NULL after an answer. */
struct sbx *e2b_signed_sandbox(struct http_conn *c);

#endif
