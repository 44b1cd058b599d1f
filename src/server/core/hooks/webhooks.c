/* Webhooks (webhooks.h): the registry, each webhook's delivery of its
 * events one after another, retries on a timer, the delivery log, and the
 * floor's check of a new webhook's target. */
#include "core/hooks/webhooks.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/base/server.h"
#include "core/egress/egress.h"
#include "core/events/events.h"
#include "core/hooks/hooksign.h"
#include "core/hooks/hookwire.h"
#include "state/store_hooks.h"

#define SECRET_MIN 16
#define SECRET_MAX 128

struct webhook_try {
  int64_t ms;
  uint64_t seq;
  char type[EVENTS_TYPE_MAX + 1];
  unsigned attempt;
  long status;
  double latency_ms;
  char error[160];
};

struct webhook {
  struct webhook *next;
  struct server *srv;
  struct events_sub sub;
  char id[17];
  char tenant[SERVE_TENANT_LEN + 1];
  bool admin; /* hears every tenant's events */
  char *url;
  char host[256]; /* the URL's, and its port */
  uint16_t port;
  json_t *types; /* as asked, or NULL: all */
  struct events_filter f;
  char *secret;
  int64_t created_ms;
  bool disabled;
  unsigned failed_in_row; /* events */
  uint64_t cursor;        /* the next event to consider */
  unsigned attempt;       /* attempts made of it */
  bool in_flight, deleted;
  uv_timer_t retry;
  bool timer_armed;
  struct webhook_try log[WEBHOOK_LOG_MAX];
  size_t nlog, log_next;
  uint64_t delivered, failed, skipped;
};

struct making;

struct webhooks {
  struct webhook *list;
  struct making *making; /* creates waiting on DNS: they count against the cap */
  struct hookwire *wire;
  struct np_floor *floor;
};

static void pump(struct webhook *w);

/* The tenant's webhooks: listed, and (with pending) those being made. */
static unsigned tenant_count(const struct webhooks *hs, const char *tenant, bool pending);

/* Whether the operator named host (and port) with --webhook-allow HOST:
 * then wherever it resolves to is its business, not the floor's. */
static bool host_permitted(const struct server *srv, const char *host, uint16_t port) {
  char canon[NETPOLICY_HOST_MAX + 1], with_port[NETPOLICY_HOST_MAX + 8];
  if (!netpolicy_host_ok(host, canon))
    return false;
  snprintf(with_port, sizeof with_port, "%s:%u", canon, port);
  for (char **h = srv->cfg.webhook_hosts; h && *h; h++)
    if (strcmp(*h, canon) == 0 || strcmp(*h, with_port) == 0)
      return true;
  return false;
}

/* ---- the store ---- */

static json_t *spec_of(const struct webhook *w) {
  return json_pack("{s:s,s:O?,s:b,s:s}", "url", w->url, "types", w->types, "admin", w->admin,
                   "state", w->disabled ? "disabled" : "active");
}

static void save(struct webhook *w) {
  struct hutch_err err = {0};
  json_t *spec = spec_of(w);
  char *text = json_dumps(spec, JSON_COMPACT);
  struct store_webhook row = {w->id, w->tenant, text, w->secret, w->created_ms};
  if (store_webhook_put(w->srv->store, &row, &err) < 0)
    fprintf(stderr, "hutch serve: webhook %s: %s\n", w->id, err.msg);
  free(text);
  json_decref(spec);
}

/* ---- one webhook ---- */

static void on_event(struct events_sub *s) {
  pump((struct webhook *)((char *)s - offsetof(struct webhook, sub)));
}

static int set_types(struct webhook *w, json_t *types, struct hutch_err *err) {
  size_t i;
  json_t *t;
  if (types && !json_is_array(types))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "types: an array of event types");
  json_array_foreach(types, i, t) {
    const char *s = json_string_value(t);
    if (!s || strchr(s, ',') || events_filter_types(&w->f, s, err) < 0)
      return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                            "types: at most %d event types (a.b, or a prefix a.*)",
                            EVENTS_TYPES_MAX);
  }
  w->types = json_array_size(types) ? json_incref(types) : NULL;
  return 0;
}

static struct webhook *webhook_new(struct server *srv, const char *id, const char *tenant) {
  struct webhook *w = xcalloc(1, sizeof *w);
  w->srv = srv;
  str_copy(w->id, sizeof w->id, id);
  str_copy(w->tenant, sizeof w->tenant, tenant);
  uv_timer_init(srv->loop, &w->retry);
  w->retry.data = w;
  return w;
}

static void webhook_closed(uv_handle_t *h) {
  struct webhook *w = h->data;
  free(w->url);
  json_decref(w->types);
  if (w->secret) {
    explicit_bzero(w->secret, strlen(w->secret));
    free(w->secret);
  }
  free(w);
}

/* Listed, and hearing events from now on. */
static void webhook_start(struct server *srv, struct webhook *w) {
  w->f.tenant = w->admin ? NULL : w->tenant;
  w->cursor = events_next(srv);
  w->sub.notify = on_event;
  events_subscribe(srv, &w->sub);
  struct webhook **tail = &srv->webhooks->list;
  while (*tail)
    tail = &(*tail)->next;
  *tail = w;
}

static void log_try(struct webhook *w, const struct hook_attempt *a, uint64_t seq,
                    const char *type) {
  struct webhook_try *t = &w->log[w->log_next];
  w->log_next = (w->log_next + 1) % WEBHOOK_LOG_MAX;
  if (w->nlog < WEBHOOK_LOG_MAX)
    w->nlog++;
  memset(t, 0, sizeof *t);
  t->ms = wall_ms();
  t->seq = seq;
  str_copy(t->type, sizeof t->type, type);
  t->attempt = w->attempt;
  if (a) {
    t->status = a->status;
    t->latency_ms = a->ms;
    str_copy(t->error, sizeof t->error, a->error);
  }
}

/* ---- delivery ---- */

static struct hook_attempt *attempt_of(struct webhook *w, const struct event *ev) {
  struct server *srv = w->srv;
  struct hook_attempt *a = xcalloc(1, sizeof *a);
  a->owner = w;
  a->url = xstrdup(w->url);
  a->len = ev->len - 1; /* the line without its newline */
  a->body = xmalloc(a->len + 1);
  memcpy(a->body, ev->line, a->len);
  a->body[a->len] = '\0';

  int64_t ts = wall_ms() / 1000;
  char sig[65];
  hooksign(w->secret, ts, a->body, a->len, sig);
  a->headers[0] = xstrdup("Content-Type: application/json");
  a->headers[1] = xasprintf("User-Agent: hutch-webhooks/%s", HUTCH_VERSION);
  a->headers[2] = xasprintf("X-Hutch-Event: %s", ev->type);
  a->headers[3] = xasprintf("X-Hutch-Delivery: %s-%llu", w->id, (unsigned long long)ev->seq);
  a->headers[4] = xasprintf("X-Hutch-Timestamp: %lld", (long long)ts);
  a->headers[5] = xasprintf("X-Hutch-Signature: sha256=%s", sig);
  a->headers[6] = xstrdup("Expect:"); /* no 100-continue round trip */

  a->timeout_ms = (long)srv->cfg.webhook_timeout_ms;
  a->floor = &srv->cfg.webhook_floor;
  a->deny = &srv->cfg.floor;
  a->host = xstrdup(w->host);
  size_t n;
  const struct sockaddr_storage *own = egress_own_addrs(srv, &n);
  a->own = n ? xmalloc(n * sizeof *own) : NULL;
  if (n)
    memcpy(a->own, own, n * sizeof *own);
  a->nown = n;
  a->server = srv->listen_addr;
  a->permitted = host_permitted(srv, w->host, w->port);
  return a;
}

static void retry_due(uv_timer_t *t) {
  struct webhook *w = t->data;
  w->timer_armed = false;
  pump(w);
}

/* The next event that is due, attempted; what the ring dropped before
 * it was reached, logged as skipped. */
static void pump(struct webhook *w) {
  struct server *srv = w->srv;
  if (w->disabled || w->in_flight || w->timer_armed || w->deleted || srv->stopping)
    return;
  while (w->cursor < events_next(srv)) {
    const struct event *ev = events_at(srv, w->cursor);
    if (!ev) {
      uint64_t first = events_first(srv);
      struct hook_attempt none = {.status = 0};
      snprintf(none.error, sizeof none.error, "%llu events were no longer kept",
               (unsigned long long)(first - w->cursor));
      log_try(w, &none, w->cursor, "events.gap");
      w->skipped += first - w->cursor;
      w->cursor = first;
      w->attempt = 0;
      continue;
    }
    if (!events_filter_match(&w->f, ev)) {
      w->cursor++;
      continue;
    }
    w->attempt++;
    w->in_flight = true;
    hookwire_send(srv->webhooks->wire, attempt_of(w, ev));
    return;
  }
}

/* An event's tries are spent: the next one; too many in a row and the
 * webhook is disabled (its state saved). */
static void event_failed(struct webhook *w) {
  w->failed++;
  w->cursor++;
  w->attempt = 0;
  if (++w->failed_in_row < WEBHOOK_DISABLE_AFTER)
    return;
  w->disabled = true;
  save(w);
  fprintf(stderr, "hutch serve: webhook %s disabled: %u events failed in a row\n", w->id,
          w->failed_in_row);
}

static void attempt_done(struct hook_attempt *a, void *arg) {
  (void)arg;
  struct webhook *w = a->owner;
  w->in_flight = false;
  if (w->deleted) {
    uv_close((uv_handle_t *)&w->retry, webhook_closed);
    hook_attempt_free(a);
    return;
  }

  const struct event *ev = events_at(w->srv, w->cursor);
  log_try(w, a, w->cursor, ev ? ev->type : "");
  bool ok = a->status >= 200 && a->status < 300;
  bool stopping = w->srv->stopping;
  bool refused = a->refused;
  hook_attempt_free(a);
  if (stopping)
    return;

  if (ok) {
    w->delivered++;
    w->failed_in_row = 0;
    w->cursor++;
    w->attempt = 0;
  } else if (refused || w->attempt >= WEBHOOK_TRIES) {
    /* The floor's refusal is not retried: it would refuse again. */
    event_failed(w);
  } else {
    w->timer_armed = true;
    uv_timer_start(&w->retry, retry_due, w->srv->cfg.webhook_backoff_ms << (w->attempt - 1), 0);
    return;
  }
  pump(w);
}

/* ---- the registry ---- */

/* url's host (256 bytes) and port: http or https, no credentials. */
static int parse_url(const char *url, char host_out[256], uint16_t *port_out,
                     struct hutch_err *err) {
  CURLU *u = curl_url();
  char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL;
  int r = -1;
  if (strlen(url) > WEBHOOK_URL_MAX || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
    hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                   "url: an http or https URL of at most %d bytes", WEBHOOK_URL_MAX);
  else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
    hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument", "url: http or https only");
  else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK)
    hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                   "url: no credentials in the URL (the signature authenticates hutch)");
  else
    r = 0;

  if (r == 0) {
    size_t n = strlen(host);
    bool v6 = n >= 2 && host[0] == '[' && host[n - 1] == ']';
    snprintf(host_out, 256, "%.*s", (int)(v6 ? n - 2 : n), v6 ? host + 1 : host);
    *port_out = (uint16_t)atoi(port);
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(user);
  curl_url_cleanup(u);
  return r;
}


static void load_one(const struct store_webhook *row, void *arg) {
  struct server *srv = arg;
  json_t *spec = json_loads(row->spec, 0, NULL);
  const char *url = json_string_value(json_object_get(spec, "url"));
  struct hutch_err err = {0};
  if (!url || !row->secret) {
    fprintf(stderr, "hutch serve: webhook %s: its row cannot be read (state.key replaced?): "
                    "left out\n", row->id);
    json_decref(spec);
    return;
  }
  /* The cap binds what a store holds too: one written by an older server
   * (which did not count creates waiting on DNS) may hold more. */
  if (tenant_count(srv->webhooks, row->tenant, false) >= WEBHOOKS_TENANT_MAX) {
    fprintf(stderr, "hutch serve: webhook %s: tenant %s already has %d webhooks, the most "
                    "it may have: not loaded (delete it or another)\n", row->id, row->tenant,
            WEBHOOKS_TENANT_MAX);
    json_decref(spec);
    return;
  }
  struct webhook *w = webhook_new(srv, row->id, row->tenant);
  if (parse_url(url, w->host, &w->port, &err) < 0)
    fprintf(stderr, "hutch serve: webhook %s: %s\n", row->id, err.msg);
  w->url = xstrdup(url);
  w->secret = xstrdup(row->secret);
  w->created_ms = row->created_ms;
  w->admin = json_is_true(json_object_get(spec, "admin"));
  const char *state = json_string_value(json_object_get(spec, "state"));
  w->disabled = state && strcmp(state, "disabled") == 0;
  if (set_types(w, json_object_get(spec, "types"), &err) < 0)
    fprintf(stderr, "hutch serve: webhook %s: %s\n", row->id, err.msg);
  json_decref(spec);
  webhook_start(srv, w);
}

int webhooks_open(struct server *srv, struct hutch_err *err) {
  srv->webhooks = xcalloc(1, sizeof *srv->webhooks);
  srv->webhooks->wire = hookwire_start(srv->loop, attempt_done, NULL);
  return store_webhook_each(srv->store, load_one, srv, err);
}

void webhooks_stop(struct server *srv) {
  struct webhooks *hs = srv->webhooks;
  if (!hs)
    return;
  hookwire_stop(hs->wire);
  for (struct webhook *w = hs->list, *next; w; w = next) {
    next = w->next;
    events_unsubscribe(srv, &w->sub);
    uv_close((uv_handle_t *)&w->retry, webhook_closed);
  }
  free(hs);
  srv->webhooks = NULL;
}

static bool visible(const struct webhook *w, const struct principal *p) {
  return p->admin || strcmp(w->tenant, p->tenant) == 0;
}

static json_t *view_of(const struct webhook *w) {
  char t[32];
  iso8601(w->created_ms, t);
  json_t *types = w->types ? json_incref(w->types) : json_array();
  return json_pack("{s:s,s:s,s:o,s:s,s:s,s:s,s:I,s:I,s:I}", "id", w->id, "tenant", w->tenant,
                   "types", types, "url", w->url, "created", t, "state",
                   w->disabled ? "disabled" : "active", "delivered", (json_int_t)w->delivered,
                   "failed", (json_int_t)w->failed, "skipped", (json_int_t)w->skipped);
}

json_t *webhooks_list(struct server *srv, const struct principal *p) {
  json_t *a = json_array();
  for (struct webhook *w = srv->webhooks->list; w; w = w->next)
    if (visible(w, p))
      json_array_append_new(a, view_of(w));
  return a;
}

static struct webhook *find(struct server *srv, const struct principal *p, const char *id,
                            struct hutch_err *err) {
  for (struct webhook *w = srv->webhooks->list; w; w = w->next)
    if (strcmp(w->id, id) == 0 && visible(w, p))
      return w;
  hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "no webhook %.32s", id);
  return NULL;
}

json_t *webhooks_get(struct server *srv, const struct principal *p, const char *id,
                     struct hutch_err *err) {
  struct webhook *w = find(srv, p, id, err);
  if (!w)
    return NULL;
  json_t *o = view_of(w), *log = json_array();
  /* Newest first. */
  for (size_t k = 0; k < w->nlog; k++) {
    const struct webhook_try *t = &w->log[(w->log_next + WEBHOOK_LOG_MAX - 1 - k) % WEBHOOK_LOG_MAX];
    char when[32];
    iso8601(t->ms, when);
    json_array_append_new(
        log, json_pack("{s:s,s:I,s:s,s:i,s:o,s:f,s:o}", "time", when, "seq", (json_int_t)t->seq,
                       "type", t->type, "attempt", (int)t->attempt, "status",
                       t->status ? json_integer(t->status) : json_null(), "latency_ms",
                       t->latency_ms, "error", t->error[0] ? json_string(t->error) : json_null()));
  }
  json_object_set_new(o, "deliveries", log);
  return o;
}

int webhooks_delete(struct server *srv, const struct principal *p, const char *id,
                    struct hutch_err *err) {
  struct webhook *w = find(srv, p, id, err);
  if (!w || store_webhook_delete(srv->store, w->id, err) < 0)
    return -1;
  struct webhook **pp = &srv->webhooks->list;
  while (*pp != w)
    pp = &(*pp)->next;
  *pp = w->next;
  events_unsubscribe(srv, &w->sub);
  w->deleted = true;
  if (!w->in_flight) /* else its attempt's end frees it */
    uv_close((uv_handle_t *)&w->retry, webhook_closed);
  return 0;
}

/* ---- a new webhook ---- */

struct making {
  struct making *next; /* in the registry's making */
  uv_getaddrinfo_t req;
  struct webhook *w;
  char host[256];
  uint16_t port;
  webhook_made_fn done;
  void *arg;
};

static unsigned tenant_count(const struct webhooks *hs, const char *tenant, bool pending) {
  unsigned n = 0;
  for (const struct webhook *w = hs->list; w; w = w->next)
    n += strcmp(w->tenant, tenant) == 0;
  for (const struct making *m = pending ? hs->making : NULL; m; m = m->next)
    n += strcmp(m->w->tenant, tenant) == 0;
  return n;
}

/* m's resolve is over, either way: it no longer counts as being made (the
 * registry is gone when the server stopped meanwhile). */
static void made_end(struct making *m) {
  struct webhooks *hs = m->w->srv->webhooks;
  for (struct making **pp = hs ? &hs->making : NULL; pp && *pp; pp = &(*pp)->next)
    if (*pp == m) {
      *pp = m->next;
      break;
    }
}

static void made_fail(struct making *m, const struct hutch_err *err) {
  made_end(m);
  m->done(NULL, err, m->arg);
  uv_close((uv_handle_t *)&m->w->retry, webhook_closed);
  free(m);
}

/* The boundary at create time: every address the host has now must pass
 * the floor (hookwire.c checks the one it connects to again at every
 * delivery, as DNS may change). */
static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  struct making *m = req->data;
  struct webhook *w = m->w;
  struct server *srv = w->srv;
  struct hutch_err err = {0};
  char why[256] = "";
  bool permitted = host_permitted(srv, m->host, m->port);

  if (status < 0 || srv->stopping) {
    hutch_err_fail(&err, HUTCH_ERR_INVALID, "webhook_target_unresolvable",
                   "url: %.200s cannot be resolved: %s", m->host, uv_strerror(status));
    uv_freeaddrinfo(res);
    made_fail(m, &err);
    return;
  }
  /* The operator's --egress-deny entries are judged first and no
   * --webhook-allow lifts them: an explicit deny wins over a permit (the
   * name was judged before it was resolved). */
  bool refused = false;
  for (struct addrinfo *ai = res; ai && !refused; ai = ai->ai_next) {
    size_t n;
    const struct sockaddr_storage *own = egress_own_addrs(srv, &n);
    struct np_target t = {
        .addr = ai->ai_addr,
        .host_own = egress_addr_among(ai->ai_addr, own, n),
        .server = srv->listen_addr.ss_family ? (const struct sockaddr *)&srv->listen_addr : NULL,
    };
    refused = netpolicy_floor_denies(&srv->cfg.floor, NULL, m->port, ai->ai_addr, why, sizeof why);
    if (!refused && !permitted)
      refused = !netpolicy_floor_check(&srv->cfg.webhook_floor, m->host, m->port, &t, why,
                                       sizeof why);
  }
  uv_freeaddrinfo(res);
  if (refused) {
    hutch_err_fail(&err, HUTCH_ERR_INVALID, "webhook_target_refused",
                   "url: %.200s is refused: %s (an operator may permit it with --webhook-allow, "
                   "unless --egress-deny lists it)",
                   m->host, why);
    made_fail(m, &err);
    return;
  }

  made_end(m);
  save(w);
  webhook_start(srv, w);
  json_t *view = view_of(w);
  json_object_set_new(view, "secret", json_string(w->secret));
  m->done(view, NULL, m->arg);
  json_decref(view);
  free(m);
}

static int check_secret(const char *secret, struct hutch_err *err) {
  size_t n = strlen(secret);
  bool printable = true;
  for (size_t i = 0; i < n; i++)
    printable = printable && secret[i] > ' ' && secret[i] < 0x7f;
  if (n < SECRET_MIN || n > SECRET_MAX || !printable)
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "invalid_argument",
                          "secret: %d to %d printable ASCII characters, no spaces", SECRET_MIN,
                          SECRET_MAX);
  return 0;
}

int webhooks_create(struct server *srv, const struct principal *p, const char *url, json_t *types,
                    const char *secret, webhook_made_fn done, void *arg, struct hutch_err *err) {
  /* The cap counts the creates still waiting on DNS: else parallel
   * creates would each see the list before any of them is in it. */
  unsigned own = tenant_count(srv->webhooks, p->tenant, true);
  if (own >= WEBHOOKS_TENANT_MAX)
    return hutch_err_fail(err, HUTCH_ERR_QUOTA, "too_many_webhooks",
                          "tenant %s has %u webhooks, the most it may have", p->tenant, own);

  struct making *m = xcalloc(1, sizeof *m);
  if (parse_url(url, m->host, &m->port, err) < 0 || (secret && check_secret(secret, err) < 0)) {
    free(m);
    return -1;
  }
  char why[256];
  if (netpolicy_floor_denies(&srv->cfg.floor, m->host, m->port, NULL, why, sizeof why)) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "webhook_target_refused", "url: %.200s is refused: %s",
                   m->host, why);
    free(m);
    return -1;
  }
  char id[17];
  random_hex(id, 16);
  struct webhook *w = webhook_new(srv, id, p->tenant);
  m->w = w;
  str_copy(w->host, sizeof w->host, m->host);
  w->port = m->port;
  if (set_types(w, types, err) < 0) {
    uv_close((uv_handle_t *)&w->retry, webhook_closed);
    free(m);
    return -1;
  }
  w->url = xstrdup(url);
  w->admin = p->admin;
  w->created_ms = wall_ms();
  if (secret) {
    w->secret = xstrdup(secret);
  } else {
    char hex[49];
    random_hex(hex, 48);
    w->secret = xasprintf("whsec_%s", hex);
  }

  m->done = done;
  m->arg = arg;
  m->req.data = m;
  m->next = srv->webhooks->making;
  srv->webhooks->making = m;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  int r = uv_getaddrinfo(srv->loop, &m->req, resolved, m->host, NULL, &hints);
  if (r < 0) {
    struct hutch_err e = {0};
    hutch_err_fail(&e, HUTCH_ERR_INVALID, "webhook_target_unresolvable",
                   "url: %.200s cannot be resolved: %s", m->host, uv_strerror(r));
    made_fail(m, &e);
  }
  return 0;
}
