/* A template's start and ready commands, run when a sandbox is made from
 * it (docs/templates.md): the start command as a background process, and
 * the create ends only once the ready command exits 0. */
#ifndef HUTCH_CORE_LIFE_STARTUP_H
#define HUTCH_CORE_LIFE_STARTUP_H

#include <jansson.h>

struct server;
struct sbx;
struct principal;
struct create_ops;

/* How long a create waits for the ready command by default
 * (--ready-timeout), how often it runs it, and how long one run may take. */
#define STARTUP_READY_TIMEOUT_MS 60000
#define STARTUP_POLL_MS 200
#define STARTUP_CHECK_TIMEOUT_MS 10000

/* sb was just made for p from the template tmpl (NULL: none): 0 when the
 * template has neither command (the create ends now, the caller's), else
 * 1, and ops->made(sb or NULL, err, arg) is called later: once the ready
 * command passed, or with the error (the start command could not start,
 * the ready command did not pass in time, the sandbox ended, the client
 * left), the sandbox destroyed. */
/* The sandbox is ready (its start and ready commands done, if any):
 * its sandbox.started event. */
void startup_ready(struct sbx *sb);
int startup_begin(struct server *srv, const struct principal *p, struct sbx *sb, json_t *tmpl,
                  const struct create_ops *ops, void *arg);

#endif
