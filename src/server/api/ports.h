/* Inbound ports (ports.c), as routes.c and the core's sandbox ends need
 * them: which requests go to a sandbox's port, their forwarding, and the
 * relayed connections a sandbox holds. */
#ifndef HUTCH_API_PORTS_H
#define HUTCH_API_PORTS_H

#include <stdbool.h>
#include <stdint.h>

struct server;
struct sbx;
struct http_conn;
struct http_req;
struct principal;

/* ports.c: a sandbox's ports, reached through the server. */
bool api_ports_routed_by_host(const struct server *srv, const struct http_req *req);
void api_ports_forward(struct http_conn *c, const struct principal *p);
/* A sandbox that is not there, as E2B's proxy answers it: 502
 * {"code": 502, "message": "The sandbox was not found", "sandboxId"}. */
void api_ports_sandbox_missing(struct http_conn *c, const char *id);
void api_ports_close_all(struct sbx *sb);
/* Connections through its ports idle for idle_ms end. */
void api_ports_sweep(struct sbx *sb, uint64_t idle_ms);

#endif
