/* The server's life apart from its command line (server_open.c). */
#ifndef HUTCH_CORE_SERVE_SERVER_OPEN_H
#define HUTCH_CORE_SERVE_SERVER_OPEN_H

#include "err.h"
#include "core/base/server.h"
#include "http/http.h"

/* A server with the defaults; open its state, listening socket and pools
 * (cfg.port 0: any free port, written back); free it all. */
struct server *server_new(void);
int server_open(struct server *srv, const struct http_handlers *h,
                const struct serve_fronts *fronts, struct hutch_err *err);
void server_free(struct server *srv);
/* Whether the state dir, if it exists already, may be trusted with keys:
 * hutch's own and writable by no one else; -1 (why in err) if not. */
int server_state_dir_check(const char *dir, struct hutch_err *err);

#endif
