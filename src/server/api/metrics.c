/* GET /metrics: the server's counters in Prometheus' text format
 * (core/metrics.c). */
#include "api/metrics.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/keys.h"
#include "core/serve/metrics.h"
#include "core/base/server.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

/* /metrics counts every tenant's sandboxes, requests and errors together:
 * the operator's view, which tells one tenant how busy the others are (a
 * tenant reads its own sandboxes' numbers at /v1/sandboxes/{id}/metrics).
 * By default only the admin key or the metrics token (what a Prometheus
 * scraper holds) may read it; a tenant's key is refused. The series that
 * name sandboxes and tenants (escape attempts, each sandbox's memory, CPU
 * and execs) are shown only to those two: --metrics-public opens the rest,
 * which name none, to anyone. */
enum reader { READER_NONE, READER_PUBLIC, READER_OPERATOR };

static enum reader may_read(struct http_conn *c) {
  const struct server *srv = c->srv;
  const char *auth = http_header(&c->req, "Authorization");
  if (auth && strncasecmp(auth, "Bearer ", 7) == 0 && metrics_token_is(srv, auth + 7))
    return READER_OPERATOR;
  struct principal p = {0};
  bool known = api_keys_authenticate(c->srv, &c->req, &p);
  if (known && p.admin)
    return READER_OPERATOR;
  if (srv->cfg.metrics_public)
    return READER_PUBLIC;
  if (known)
    http_error(c, HUTCH_ERR_FORBIDDEN, "forbidden",
               "/metrics is the operator's: the admin key or the metrics "
               "token reads it");
  else
    http_error(c, HUTCH_ERR_UNAUTHENTICATED, "unauthorized",
               "/metrics needs the admin key or the metrics token "
               "(Authorization: Bearer TOKEN)");
  return READER_NONE;
}

void api_metrics(struct http_conn *c, const struct principal *p) {
  (void)p;
  enum reader reader = may_read(c);
  if (reader == READER_NONE)
    return;
  size_t queued = 0;
  for (const struct http_conn *k = c->srv->http.conns; k; k = k->next)
    queued += http_queued(k);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f)
    abort();
  metrics_write(f, c->srv, reader == READER_OPERATOR, queued);
  fclose(f);
  http_respond(c, 200, "text/plain; version=0.0.4", text, len, NULL);
  free(text);
}
