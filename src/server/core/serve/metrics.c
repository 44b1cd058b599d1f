/* The server's counters, and their Prometheus text for GET /metrics
 * (api/metrics.c). */
#include "core/serve/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"
#include "core/sandbox/escapes.h"
#include "core/serve/metrics_sandboxes.h"
#include "core/life/pool.h"
#include "core/base/counters.h"
#include "core/base/server.h"

#define METRICS_TOKEN_MIN 16
#define METRICS_TOKEN_MAX 256

int metrics_open(struct server *srv, struct hutch_err *err) {
  const char *path = srv->cfg.metrics_token_file;
  if (!path)
    return 0;

  char buf[METRICS_TOKEN_MAX + 2];
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return hutch_err_set(err, errno, "--metrics-token-file %s", path);
  ssize_t n = read_all(fd, buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';

  size_t len = strlen(buf);
  bool ok = len >= METRICS_TOKEN_MIN && len <= METRICS_TOKEN_MAX &&
            strspn(buf, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                        "-._~+/=") == len;
  if (ok)
    srv->metrics_token = xstrdup(buf);
  explicit_bzero(buf, sizeof buf);

  if (!ok)
    return hutch_err_invalid(err,
                             "--metrics-token-file %s: its first line must be a token of "
                             "%d to %d letters, digits or -._~+/=",
                             path, METRICS_TOKEN_MIN, METRICS_TOKEN_MAX);
  return 0;
}

bool metrics_token_is(const struct server *srv, const char *token) {
  if (!srv->metrics_token || !token)
    return false;
  size_t n = strlen(srv->metrics_token);
  return strlen(token) == n && CRYPTO_memcmp(token, srv->metrics_token, n) == 0;
}

static void histogram(FILE *f, const char *name, const char *help, const uint64_t hist[16],
                      double sum) {
  fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i <= COUNTERS_BOUNDS; i++) {
    cum += hist[i];
    if (i < COUNTERS_BOUNDS)
      fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, counters_bounds[i], (unsigned long long)cum);
    else
      fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
  }
  fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, sum, name, (unsigned long long)cum);
}

/* Sandboxes per isolation tier, and what each tier runs on. */
static void tiers_write(FILE *f, const struct server *srv) {
  unsigned gvisor = srv->ngvisor;
  fprintf(f,
          "# HELP hutch_sandboxes_by_isolation Sandboxes by isolation tier.\n"
          "# TYPE hutch_sandboxes_by_isolation gauge\n"
          "hutch_sandboxes_by_isolation{isolation=\"ns\"} %u\n"
          "hutch_sandboxes_by_isolation{isolation=\"gvisor\"} %u\n"
          "# HELP hutch_isolation_info Isolation tiers offered (1) or not (0); runsc's version.\n"
          "# TYPE hutch_isolation_info gauge\n"
          "hutch_isolation_info{isolation=\"ns\",default=\"%s\"} 1\n",
          srv->nsandboxes - gvisor, gvisor,
          srv->cfg.isolation == HUTCH_ISOLATION_NS ? "true" : "false");
  fprintf(f,
          "hutch_isolation_info{isolation=\"gvisor\",default=\"%s\",runsc=\"%s\","
          "platform=\"%s\"} %d\n",
          srv->cfg.isolation == HUTCH_ISOLATION_GVISOR ? "true" : "false",
          srv->has_gvisor ? srv->gvisor.version : "", srv->has_gvisor ? srv->gvisor.platform : "",
          srv->has_gvisor);
}

void metrics_write(FILE *f, const struct server *srv, bool operator, size_t queued) {
  const struct metrics *m = &srv->metrics;

  /* The sandboxes. */
  fprintf(f, "# HELP hutch_sandboxes Sandboxes by state.\n# TYPE hutch_sandboxes gauge\n");
  unsigned paused = srv->npaused;
  fprintf(f, "hutch_sandboxes{state=\"running\"} %u\nhutch_sandboxes{state=\"paused\"} %u\n",
          srv->nsandboxes - paused, paused);
  fprintf(f,
          "# HELP hutch_sandboxes_creating Creates under way, their client there or gone.\n"
          "# TYPE hutch_sandboxes_creating gauge\nhutch_sandboxes_creating %u\n",
          srv->ncreating);
  tiers_write(f, srv);
  fprintf(f,
          "# HELP hutch_sandboxes_created_total Sandboxes created.\n"
          "# TYPE hutch_sandboxes_created_total counter\n"
          "hutch_sandboxes_created_total %llu\n",
          (unsigned long long)m->creates);
  fprintf(f,
          "# HELP hutch_sandboxes_destroyed_total Sandboxes destroyed (expired ones too).\n"
          "# TYPE hutch_sandboxes_destroyed_total counter\n"
          "hutch_sandboxes_destroyed_total %llu\n",
          (unsigned long long)m->destroys);
  fprintf(f,
          "# HELP hutch_sandboxes_expired_total Sandboxes ended by their timeout.\n"
          "# TYPE hutch_sandboxes_expired_total counter\n"
          "hutch_sandboxes_expired_total %llu\n",
          (unsigned long long)m->expired);

  fprintf(f,
          "# HELP hutch_egress_connections_total Connections through egress proxies.\n"
          "# TYPE hutch_egress_connections_total counter\n"
          "hutch_egress_connections_total{verdict=\"allowed\"} %llu\n"
          "hutch_egress_connections_total{verdict=\"denied\"} %llu\n",
          (unsigned long long)m->egress_allowed, (unsigned long long)m->egress_denied);
  pool_metrics(f, srv);
  if (operator) {
    escapes_metrics(f, srv);
    metrics_sandboxes_write(f, srv);
  }

  histogram(f, "hutch_create_seconds", "Time to create a sandbox, request to response.",
            m->create_hist, m->create_sum_s);
  histogram(f, "hutch_exec_start_seconds", "Time from an exec request to its process running.",
            m->exec_hist, m->exec_sum_s);

  /* The HTTP server. */
  fprintf(f,
          "# HELP hutch_http_connections Open HTTP connections.\n"
          "# TYPE hutch_http_connections gauge\nhutch_http_connections %u\n",
          srv->http.nconns);
  fprintf(f,
          "# HELP hutch_http_queued_bytes Response bytes waiting for slow clients.\n"
          "# TYPE hutch_http_queued_bytes gauge\nhutch_http_queued_bytes %zu\n",
          queued);
  fprintf(f,
          "# HELP hutch_http_requests_total HTTP requests dispatched.\n"
          "# TYPE hutch_http_requests_total counter\nhutch_http_requests_total %llu\n",
          (unsigned long long)m->requests);
  fprintf(f, "# HELP hutch_http_errors_total Error responses by status.\n"
             "# TYPE hutch_http_errors_total counter\n");
  for (int s = 400; s < 600; s++)
    if (m->errors_by_status[s] || (s == 503 && srv->http.refused))
      fprintf(f, "hutch_http_errors_total{status=\"%d\"} %llu\n", s,
              (unsigned long long)(m->errors_by_status[s] + (s == 503 ? srv->http.refused : 0)));
  fprintf(f, "# HELP hutch_errors_by_code_total Error answers by their error code.\n"
             "# TYPE hutch_errors_by_code_total counter\n");
  for (size_t i = 0; i < METRICS_CODES && m->errors_by_code[i].code[0]; i++)
    fprintf(f, "hutch_errors_by_code_total{code=\"%s\"} %llu\n", m->errors_by_code[i].code,
            (unsigned long long)m->errors_by_code[i].n);
}
