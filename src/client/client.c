/* The native API over HTTP (client.h): one curl easy handle per call. */
#include "client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

struct hc_handles {
  pthread_mutex_t lock;
  CURL **idle;
  unsigned n, max;
};

struct hc_handles *hc_handles_new(unsigned max) {
  struct hc_handles *hs = xmalloc(sizeof *hs);
  pthread_mutex_init(&hs->lock, NULL);
  hs->idle = xmalloc(max * sizeof *hs->idle);
  hs->n = 0;
  hs->max = max;
  return hs;
}

void hc_handles_free(struct hc_handles *hs) {
  if (!hs)
    return;
  for (unsigned i = 0; i < hs->n; i++)
    curl_easy_cleanup(hs->idle[i]);
  pthread_mutex_destroy(&hs->lock);
  free(hs->idle);
  free(hs);
}

/* A handle for one call: a kept one (reset, its connection kept), or new. */
static CURL *handle_take(struct hc_handles *hs) {
  CURL *h = NULL;
  if (hs) {
    pthread_mutex_lock(&hs->lock);
    if (hs->n)
      h = hs->idle[--hs->n];
    pthread_mutex_unlock(&hs->lock);
  }
  if (h) {
    curl_easy_reset(h);
    return h;
  }
  return curl_easy_init();
}

/* Kept for the next call, unless the call was cut (its connection is then
 * in no state to be reused) or enough are kept. */
static void handle_give(struct hc_handles *hs, CURL *h, bool reusable) {
  if (hs && reusable) {
    pthread_mutex_lock(&hs->lock);
    if (hs->n < hs->max) {
      hs->idle[hs->n++] = h;
      h = NULL;
    }
    pthread_mutex_unlock(&hs->lock);
  }
  if (h)
    curl_easy_cleanup(h);
}

struct xfer {
  const struct hc_req *call;
  struct hc_answer *a;
  char *buf; /* the body, or the partial NDJSON line */
  size_t len, cap;
  bool stopped;      /* line() asked to stop, or idle_ms passed */
  int64_t last_line; /* ms (monotonic) of the last line; 0: none yet */
};

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void buf_add(struct xfer *x, const char *p, size_t n) {
  if (x->len + n + 1 > x->cap) {
    size_t cap = x->cap ? x->cap : 4096;
    while (cap < x->len + n + 1)
      cap *= 2;
    x->buf = realloc(x->buf, cap);
    if (!x->buf)
      abort();
    x->cap = cap;
  }
  memcpy(x->buf + x->len, p, n);
  x->len += n;
  x->buf[x->len] = '\0';
}

/* Whole lines of buf to line(); what follows the last newline stays. */
static void lines_out(struct xfer *x) {
  size_t start = 0;
  for (size_t i = 0; i < x->len && !x->stopped; i++) {
    if (x->buf[i] != '\n')
      continue;
    /* An exec's output may hold NUL bytes (\u0000 in its data): such a
     * line is taken, not dropped. */
    json_t *obj = json_loadb(x->buf + start, i - start, JSON_ALLOW_NUL, NULL);
    if (obj) {
      int rc = x->call->line(x->call->arg, obj);
      if (rc == HC_LINE_STOP)
        x->stopped = true;
      else if (rc == HC_LINE_NEW)
        x->last_line = mono_ms();
      json_decref(obj);
    }
    start = i + 1;
  }
  memmove(x->buf, x->buf + start, x->len - start);
  x->len -= start;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg) {
  struct xfer *x = arg;
  size_t n = size * nmemb;

  /* Errors come as one JSON body even on NDJSON routes: lines only for
   * a success (the status is known once the body starts). */
  bool as_lines = x->call->line && x->a->status < 300;
  if (!as_lines && x->len + n > HC_BODY_MAX) {
    x->a->cut = true;
    n = HC_BODY_MAX > x->len ? HC_BODY_MAX - x->len : 0;
    buf_add(x, p, n);
    return 0; /* stop: the rest is dropped */
  }
  buf_add(x, p, n);
  if (as_lines) {
    lines_out(x);
    if (x->len > HC_BODY_MAX) /* a line that never ends */
      return 0;
  }
  return x->stopped ? 0 : size * nmemb;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg) {
  struct xfer *x = arg;
  size_t n = size * nmemb;
  if (n > 9 && strncmp(p, "HTTP/", 5) == 0) {
    const char *sp = memchr(p, ' ', n);
    if (sp)
      x->a->status = strtol(sp + 1, NULL, 10);
  }
  return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *arg) {
  struct xfer *x = arg;
  ssize_t n;
  do
    n = read(x->call->upload_fd, p, size * nmemb);
  while (n < 0 && errno == EINTR);
  return n < 0 ? CURL_READFUNC_ABORT : (size_t)n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut;
  struct xfer *x = arg;
  if (x->call->sent && x->call->upload)
    x->call->sent(x->call->arg, (uint64_t)un, x->call->upload_len);
  if (x->call->idle_ms && x->last_line && mono_ms() - x->last_line >= x->call->idle_ms) {
    x->stopped = true; /* what was there is read */
    return 1;
  }
  return x->call->cancel && atomic_load(x->call->cancel) ? 1 : 0;
}

/* The native error's code and message, when the body is one. */
static void error_of(struct hc_answer *a) {
  json_t *e = a->json ? json_object_get(a->json, "error") : NULL;
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  str_copy(a->code, sizeof a->code, code ? code : "http_error");
  if (msg)
    str_copy(a->message, sizeof a->message, msg);
  else
    snprintf(a->message, sizeof a->message, "the native API answered %ld", a->status);
}

bool hc_call(const struct hc_client *n, const struct hc_req *call, struct hc_answer *a) {
  memset(a, 0, sizeof *a);
  CURL *h = handle_take(n->handles);
  if (!h) {
    str_copy(a->message, sizeof a->message, "curl_easy_init failed");
    return false;
  }
  struct xfer x = {.call = call, .a = a};
  char url[4096], auth[320], ctype[128], accept[128];
  snprintf(url, sizeof url, "%s%s", n->url, call->path);
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", n->key);
  snprintf(ctype, sizeof ctype, "Content-Type: %s", call->ctype ? call->ctype : "application/json");

  struct curl_slist *hdrs = curl_slist_append(NULL, auth);
  hdrs = curl_slist_append(hdrs, ctype);
  hdrs = curl_slist_append(hdrs, "Expect:");
  if (call->accept) {
    snprintf(accept, sizeof accept, "Accept: %s", call->accept);
    hdrs = curl_slist_append(hdrs, accept);
  }
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call->method);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  hc_curl_opts(n, h);
  /* An id of "." or ".." is the server's to refuse, not curl's to fold
   * into another route. */
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  if (call->timeout_ms > 0)
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, call->timeout_ms);
  if (call->upload) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &x);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->upload_len);
  } else if (call->body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, call->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->body_len);
  } else if (strcmp(call->method, "GET") != 0 && strcmp(call->method, "DELETE") != 0) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
  }

  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
  curl_slist_free_all(hdrs);
  handle_give(n->handles, h, rc == CURLE_OK && !x.stopped && !a->cut);

  bool stopped_on_purpose = x.stopped || a->cut;
  if (rc != CURLE_OK && !stopped_on_purpose) {
    free(x.buf);
    bool cancelled = call->cancel && atomic_load(call->cancel);
    if (cancelled)
      str_copy(a->message, sizeof a->message, "cancelled");
    else if (rc == CURLE_OPERATION_TIMEDOUT)
      str_copy(a->message, sizeof a->message, "the native API did not answer in time");
    else
      snprintf(a->message, sizeof a->message, "the native API at %s: %s", n->url,
               curl_easy_strerror(rc));
    if (rc == CURLE_COULDNT_CONNECT)
      a->unreachable = "connection refused";
    else if (rc == CURLE_COULDNT_RESOLVE_HOST)
      a->unreachable = "no such host";
    a->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    a->status = 0;
    return false;
  }

  if (call->line && a->status < 300) {
    free(x.buf);
    return true;
  }
  a->body = x.buf ? x.buf : xstrdup("");
  a->len = x.len;
  a->json = json_loadb(a->body, a->len, 0, NULL);
  if (a->status >= 400)
    error_of(a);
  return true;
}

void hc_answer_free(struct hc_answer *a) {
  free(a->body);
  json_decref(a->json);
  a->body = NULL;
  a->json = NULL;
}

char *hc_escape(const char *s) {
  char *e = curl_easy_escape(NULL, s, 0);
  char *out = xstrdup(e ? e : "");
  curl_free(e);
  return out;
}

/* The admin key of a local server, when this user may read it. */
static bool local_key(char *key, size_t n) {
  const char *dir = getenv("HUTCH_STATE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/admin.key", dir && *dir ? dir : "/var/lib/hutch");
  FILE *f = fopen(path, "r");
  if (!f)
    return false;
  bool ok = fgets(key, (int)n, f) != NULL;
  fclose(f);
  key[strcspn(key, "\r\n")] = '\0';
  return ok && key[0];
}

/* Whether url's host is this machine's loopback: 127.0.0.0/8, ::1 or
 * localhost. The host is taken by curl's own parser, the one the call
 * connects with, so that no spelling (user@host, a bracket, a port) reads
 * as loopback here and as another host there; anything else, or what
 * does not parse, is not loopback. */
static bool loopback_url(const char *url) {
  CURLU *u = curl_url();
  char *host = NULL;
  bool lo = false;
  if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
    struct in_addr a4;
    struct in6_addr a6;
    size_t n = strlen(host);
    if (strcasecmp(host, "localhost") == 0)
      lo = true;
    else if (inet_pton(AF_INET, host, &a4) == 1)
      lo = (ntohl(a4.s_addr) >> 24) == 127;
    else if (n > 2 && host[0] == '[' && host[n - 1] == ']') {
      host[n - 1] = '\0';
      lo = inet_pton(AF_INET6, host + 1, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
    }
  }
  curl_free(host);
  curl_url_cleanup(u);
  return lo;
}

int hc_client_setup(struct hc_client *c, const char *url, const char *key, char *why, size_t n) {
  if (!url || !*url)
    url = getenv("HUTCH_URL");
  if (!url || !*url)
    url = "http://127.0.0.1:7420";
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
    snprintf(why, n, "--url wants http://HOST:PORT or https://..., not '%s'", url);
    return HC_SETUP_BAD_URL;
  }
  if (strlen(url) >= sizeof c->url) {
    snprintf(why, n, "--url is longer than %zu bytes", sizeof c->url - 1);
    return HC_SETUP_BAD_URL;
  }
  str_copy(c->url, sizeof c->url, url);
  size_t len = strlen(c->url);
  while (len && c->url[len - 1] == '/')
    c->url[--len] = '\0';
  c->loopback = loopback_url(c->url);

  if (!key || !*key)
    key = getenv("HUTCH_API_KEY");
  if (key && *key) {
    str_copy(c->key, sizeof c->key, key);
    return HC_SETUP_OK;
  }
  /* The admin key file is the key of the server on this machine, and of
   * no other: it is sent only to a loopback URL, and then past no proxy
   * (hc_curl_opts). A URL that names any other host (set by mistake, or
   * by whoever wrote the environment the operator runs hutch in) would
   * otherwise be handed the whole server's admin key, maybe in plain
   * http: there the operator must name a key, and nothing is read or
   * sent before. */
  if (!c->loopback) {
    snprintf(why, n,
             "no API key for %s (set HUTCH_API_KEY or --key; the local admin key goes to a "
             "loopback server only)",
             c->url);
    return HC_SETUP_NO_KEY;
  }
  if (local_key(c->key, sizeof c->key))
    return HC_SETUP_OK;
  snprintf(why, n,
           "no API key: set HUTCH_API_KEY or --key (the admin key of a local server "
           "is read only when this user may read it)");
  return HC_SETUP_NO_KEY;
}

void hc_curl_opts(const struct hc_client *c, void *curl) {
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  /* A proxy between hutch and a loopback server would be handed the
   * key: none is used for one, whatever http_proxy says. */
  if (c->loopback)
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
}

void hc_init(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
}
