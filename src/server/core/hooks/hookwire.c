/* The webhook delivery thread (hookwire.h): attempts come in on a list
 * under a lock (curl_multi_wakeup rouses the thread), ended ones go back
 * on another, announced to the loop by a uv_async. */
#include "core/hooks/hookwire.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/egress/egress.h"

#define REPLY_MAX (64u << 10) /* of a receiver's answer read (and dropped) */

struct running_easy {
  struct running_easy *prev, *next;
  CURL *e;
  struct hook_attempt *a;
  struct curl_slist *headers;
  size_t got;
};

struct hookwire {
  uv_async_t async;
  void (*done)(struct hook_attempt *a, void *arg);
  void *arg;
  pthread_t thread;
  pthread_mutex_t lock;
  CURLM *multi;
  struct hook_attempt *in, *out; /* under lock */
  bool stop;                     /* under lock */
  struct running_easy *easies;   /* the thread's own: attempts under way */
};

void hook_attempt_free(struct hook_attempt *a) {
  free(a->url);
  for (size_t i = 0; i < HOOKWIRE_HEADERS; i++)
    free(a->headers[i]);
  free(a->body);
  free(a->host);
  free(a->own);
  free(a);
}

static uint16_t port_of(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)sa)->sin_port);
  if (sa->sa_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
  return 0;
}

/* The boundary: every connection an attempt makes is opened here, so the
 * floor judges the address curl resolved and will connect to, not a
 * name (hookwire.h says why that defeats rebinding). */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *ca) {
  struct hook_attempt *a = arg;
  (void)purpose;
  const struct sockaddr *sa = &ca->addr;
  struct np_target t = {
      .addr = sa,
      .host_own = egress_addr_among(sa, a->own, a->nown),
      .server = a->server.ss_family ? (const struct sockaddr *)&a->server : NULL,
  };
  char why[200];
  /* The operator's --egress-deny entries bind every connection out, a
   * webhook's too: no --webhook-allow lifts them. */
  bool refused = netpolicy_floor_denies(a->deny, a->host, port_of(sa), sa, why, sizeof why);
  if (!refused && !a->permitted)
    refused = !netpolicy_floor_check(a->floor, NULL, port_of(sa), &t, why, sizeof why);
  if (refused) {
    a->refused = true;
    snprintf(a->error, sizeof a->error, "refused by the deny floor: %s", why);
    return CURL_SOCKET_BAD;
  }
  return socket(ca->family, ca->socktype | SOCK_CLOEXEC, ca->protocol);
}

static size_t drop_reply(char *p, size_t size, size_t n, void *arg) {
  (void)p;
  size_t *got = arg;
  *got += size * n;
  return *got > REPLY_MAX ? 0 : size * n; /* more is not read: the attempt ends */
}


static void begin(struct hookwire *w, struct hook_attempt *a) {
  CURL *e = curl_easy_init();
  struct running_easy *r = xcalloc(1, sizeof *r);
  r->a = a;
  for (size_t i = 0; i < HOOKWIRE_HEADERS && a->headers[i]; i++)
    r->headers = curl_slist_append(r->headers, a->headers[i]);

  curl_easy_setopt(e, CURLOPT_URL, a->url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, a->timeout_ms);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, a->body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)a->len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, a);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, drop_reply);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &r->got);
  curl_easy_setopt(e, CURLOPT_PRIVATE, r);
  a->t0_ns = now_ns();
  r->e = e;
  r->next = w->easies;
  if (w->easies)
    w->easies->prev = r;
  w->easies = r;
  curl_multi_add_handle(w->multi, e);
}

static void hand_back(struct hookwire *w, struct hook_attempt *a) {
  pthread_mutex_lock(&w->lock);
  a->next = w->out;
  w->out = a;
  pthread_mutex_unlock(&w->lock);
  uv_async_send(&w->async);
}

static void unlink_easy(struct hookwire *w, struct running_easy *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    w->easies = r->next;
  if (r->next)
    r->next->prev = r->prev;
  curl_multi_remove_handle(w->multi, r->e);
  curl_easy_cleanup(r->e);
  curl_slist_free_all(r->headers);
}

static void finish(struct hookwire *w, CURL *e, CURLcode rc) {
  struct running_easy *r;
  curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
  struct hook_attempt *a = r->a;
  a->ms = (double)(now_ns() - a->t0_ns) / 1e6;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &a->status);
  if (rc != CURLE_OK && !a->refused)
    snprintf(a->error, sizeof a->error, "%s", curl_easy_strerror(rc));
  unlink_easy(w, r);
  free(r);
  hand_back(w, a);
}

static void *run(void *arg) {
  struct hookwire *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->lock);
    bool stop = w->stop;
    struct hook_attempt *in = w->in;
    w->in = NULL;
    pthread_mutex_unlock(&w->lock);
    if (stop)
      break;

    for (struct hook_attempt *a = in, *next; a; a = next) {
      next = a->next;
      begin(w, a);
    }
    int running;
    curl_multi_perform(w->multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(w->multi, &left)))
      if (m->msg == CURLMSG_DONE)
        finish(w, m->easy_handle, m->data.result);
    curl_multi_poll(w->multi, NULL, 0, 1000, NULL);
  }
  return NULL;
}

static void on_async(uv_async_t *h) {
  struct hookwire *w = h->data;
  pthread_mutex_lock(&w->lock);
  struct hook_attempt *out = w->out;
  w->out = NULL;
  pthread_mutex_unlock(&w->lock);
  for (struct hook_attempt *a = out, *next; a; a = next) {
    next = a->next;
    w->done(a, w->arg);
  }
}

struct hookwire *hookwire_start(uv_loop_t *loop, void (*done)(struct hook_attempt *a, void *arg),
                                void *arg) {
  /* Before the thread: curl's global set-up must not race a handle's
   * use (it counts its callers, so MCP's own call later is harmless). */
  curl_global_init(CURL_GLOBAL_DEFAULT);
  struct hookwire *w = xcalloc(1, sizeof *w);
  w->done = done;
  w->arg = arg;
  w->multi = curl_multi_init();
  pthread_mutex_init(&w->lock, NULL);
  uv_async_init(loop, &w->async, on_async);
  w->async.data = w;
  if (pthread_create(&w->thread, NULL, run, w) != 0) {
    fprintf(stderr, "hutch serve: webhooks: no thread for deliveries\n");
    abort();
  }
  return w;
}

void hookwire_send(struct hookwire *w, struct hook_attempt *a) {
  pthread_mutex_lock(&w->lock);
  a->next = w->in;
  w->in = a;
  pthread_mutex_unlock(&w->lock);
  curl_multi_wakeup(w->multi);
}

static void async_closed(uv_handle_t *h) {
  struct hookwire *w = h->data;
  pthread_mutex_destroy(&w->lock);
  free(w);
}

static void stopped(struct hookwire *w, struct hook_attempt *a) {
  snprintf(a->error, sizeof a->error, "the server is stopping");
  w->done(a, w->arg);
}

void hookwire_stop(struct hookwire *w) {
  pthread_mutex_lock(&w->lock);
  w->stop = true;
  pthread_mutex_unlock(&w->lock);
  curl_multi_wakeup(w->multi);
  pthread_join(w->thread, NULL);

  /* What the thread had not ended ends now, on the loop's thread. */
  while (w->easies) {
    struct running_easy *r = w->easies;
    unlink_easy(w, r);
    stopped(w, r->a);
    free(r);
  }
  curl_multi_cleanup(w->multi);
  on_async(&w->async);
  for (struct hook_attempt *a = w->in, *next; a; a = next) {
    next = a->next;
    stopped(w, a);
  }
  w->in = NULL;
  uv_close((uv_handle_t *)&w->async, async_closed);
}
