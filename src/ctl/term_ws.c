/* The WebSocket client of the CLI's sessions (term_ws.h): curl's
 * connection, the upgrade request and its answer checked, then wslay's
 * client framing (masked frames, as RFC 6455 asks of a client). */
#include "term_ws.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#include "digest.h"
#include "util.h"

struct term_ws {
  CURL *h;
  int fd;
  wslay_event_context_ptr ctx;
  char *early; /* bytes that came after the answer's head: frames already */
  size_t early_len, early_off;
  bool eof; /* the server ended the stream */
  term_ws_msg_fn *fn;
  void *arg;
};

/* ---- wslay's callbacks, over curl's connection ---- */

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user) {
  (void)flags;
  struct term_ws *w = user;
  if (w->early_off < w->early_len) {
    size_t n = w->early_len - w->early_off;
    n = n < len ? n : len;
    memcpy(buf, w->early + w->early_off, n);
    w->early_off += n;
    return (ssize_t)n;
  }
  size_t got = 0;
  CURLcode rc = curl_easy_recv(w->h, buf, len, &got);
  if (rc == CURLE_AGAIN) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (rc != CURLE_OK || got == 0) {
    w->eof = true;
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return (ssize_t)got;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user) {
  (void)flags;
  struct term_ws *w = user;
  size_t sent = 0;
  CURLcode rc = curl_easy_send(w->h, data, len, &sent);
  if (rc == CURLE_AGAIN) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (rc != CURLE_OK) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return (ssize_t)sent;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user) {
  (void)ctx, (void)user;
  if (getrandom(buf, len, 0) != (ssize_t)len)
    return -1;
  return 0;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user) {
  (void)ctx;
  struct term_ws *w = user;
  if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
    w->fn(w->arg, arg->opcode == WSLAY_TEXT_FRAME, arg->msg, arg->msg_length);
}

static const struct wslay_event_callbacks callbacks = {
    .recv_callback = recv_cb,
    .send_callback = send_cb,
    .genmask_callback = genmask_cb,
    .on_msg_recv_callback = on_msg,
};

/* ---- the upgrade ---- */

/* The value of header name in head (its lines after the first), NUL
 * ended in out; false when absent. */
static bool head_value(const char *head, size_t n, const char *name, char *out, size_t cap) {
  size_t nlen = strlen(name);
  const char *end = head + n;
  const char *line = memchr(head, '\n', n);
  while (line && ++line < end) {
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    size_t len = (size_t)((eol ? eol : end) - line);
    if (len > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
      const char *v = line + nlen + 1;
      size_t vlen = len - nlen - 1;
      while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
      while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
        vlen--;
      if (vlen >= cap)
        return false;
      memcpy(out, v, vlen);
      out[vlen] = '\0';
      return true;
    }
    line = eol;
  }
  return false;
}

int term_ws_check_head(const char *head, size_t n, const char *accept, long *status) {
  *status = 0;
  if (n < 12 || strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ')
    return -1;
  char code[4] = {head[9], head[10], head[11], '\0'};
  for (int i = 0; i < 3; i++)
    if (code[i] < '0' || code[i] > '9')
      return -1;
  *status = strtol(code, NULL, 10);
  if (*status != 101)
    return -1;

  char v[256];
  if (!head_value(head, n, "Upgrade", v, sizeof v) || strcasecmp(v, "websocket") != 0)
    return -1;
  if (!head_value(head, n, "Connection", v, sizeof v) || !strcasestr(v, "upgrade"))
    return -1;
  if (!head_value(head, n, "Sec-WebSocket-Accept", v, sizeof v) || strcmp(v, accept) != 0)
    return -1;
  return 0;
}

/* Wait until the socket can be read (or written); false after timeout. */
static bool wait_fd(int fd, short events) {
  struct pollfd p = {.fd = fd, .events = events};
  int r;
  do
    r = poll(&p, 1, 30000);
  while (r < 0 && errno == EINTR);
  return r > 0;
}

static bool send_all(struct term_ws *w, const char *data, size_t n) {
  while (n) {
    size_t sent = 0;
    CURLcode rc = curl_easy_send(w->h, data, n, &sent);
    if (rc == CURLE_AGAIN) {
      if (!wait_fd(w->fd, POLLOUT))
        return false;
      continue;
    }
    if (rc != CURLE_OK)
      return false;
    data += sent;
    n -= sent;
  }
  return true;
}

/* Read into buf (of cap) until its first len bytes hold stop (NULL: until
 * cap or the end); the bytes read, or -1 on a broken connection. */
static ssize_t recv_until(struct term_ws *w, char *buf, size_t cap, size_t have, const char *stop) {
  while (have < cap) {
    if (stop && memmem(buf, have, stop, strlen(stop)))
      break;
    size_t got = 0;
    CURLcode rc = curl_easy_recv(w->h, buf + have, cap - have, &got);
    if (rc == CURLE_AGAIN) {
      if (!wait_fd(w->fd, POLLIN))
        return -1;
      continue;
    }
    if (rc != CURLE_OK)
      return -1;
    if (got == 0)
      break;
    have += got;
  }
  return (ssize_t)have;
}

/* A refusal's body: the native error's code and message, when it has them. */
static void read_refusal(struct term_ws *w, const char *head, size_t head_len, const char *rest,
                         size_t rest_len, struct term_ws_err *err) {
  char v[32];
  size_t want = TERM_WS_BODY_MAX;
  if (head_value(head, head_len, "Content-Length", v, sizeof v) && strtoul(v, NULL, 10) < want)
    want = strtoul(v, NULL, 10);
  char *body = xmalloc(want + 1);
  size_t have = rest_len < want ? rest_len : want;
  memcpy(body, rest, have);
  ssize_t got = recv_until(w, body, want, have, NULL);
  json_t *j = json_loadb(body, got > 0 ? (size_t)got : 0, 0, NULL);
  json_t *e = json_object_get(j, "error");
  const char *code = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  snprintf(err->code, sizeof err->code, "%s", code ? code : "http_error");
  if (msg)
    snprintf(err->message, sizeof err->message, "%s", msg);
  else
    snprintf(err->message, sizeof err->message, "the server answered %ld", err->status);
  json_decref(j);
  free(body);
}

static char *upgrade_request(const char *url, const char *key, const char *path,
                             const char *ws_key) {
  CURLU *u = curl_url();
  char *host = NULL, *port = NULL;
  if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK)
    curl_url_get(u, CURLUPART_HOST, &host, 0);
  curl_url_get(u, CURLUPART_PORT, &port, 0);
  char *req =
      xasprintf("GET %s HTTP/1.1\r\nHost: %s%s%s\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                "Sec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n"
                "User-Agent: hutch-ctl\r\n\r\n",
                path, host ? host : "localhost", port ? ":" : "", port ? port : "", ws_key, key);
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(u);
  return req;
}

/* The upgrade on w's connection: request, answer, the frames that came
 * with it kept for wslay. */
static bool upgrade(struct term_ws *w, const char *url, const char *key, const char *path,
                    struct term_ws_err *err) {
  unsigned char raw[16];
  char ws_key[32], accept[32];
  if (getrandom(raw, sizeof raw, 0) != sizeof raw)
    abort();
  EVP_EncodeBlock((unsigned char *)ws_key, raw, sizeof raw);
  digest_ws_accept(ws_key, accept);

  char *req = upgrade_request(url, key, path, ws_key);
  bool sent = send_all(w, req, strlen(req));
  free(req);
  char *buf = xmalloc(TERM_WS_HEAD_MAX);
  ssize_t got = sent ? recv_until(w, buf, TERM_WS_HEAD_MAX, 0, "\r\n\r\n") : -1;
  const char *blank = got > 0 ? memmem(buf, (size_t)got, "\r\n\r\n", 4) : NULL;
  if (!blank) {
    snprintf(err->message, sizeof err->message, "no answer to the WebSocket upgrade from %s", url);
    free(buf);
    return false;
  }

  size_t head_len = (size_t)(blank - buf), rest = (size_t)got - head_len - 4;
  if (term_ws_check_head(buf, head_len, accept, &err->status) < 0) {
    if (err->status == 101 || err->status == 0)
      snprintf(err->message, sizeof err->message, "%s did not upgrade to a WebSocket", url);
    else
      read_refusal(w, buf, head_len, blank + 4, rest, err);
    free(buf);
    return false;
  }
  w->early = xmalloc(rest + 1);
  memcpy(w->early, blank + 4, rest);
  w->early_len = rest;
  free(buf);
  return true;
}

struct term_ws *term_ws_open(const struct hc_client *c, const char *path,
                             struct term_ws_err *err) {
  memset(err, 0, sizeof *err);
  struct term_ws *w = xcalloc(1, sizeof *w);
  w->h = curl_easy_init();
  curl_easy_setopt(w->h, CURLOPT_URL, c->url);
  curl_easy_setopt(w->h, CURLOPT_CONNECT_ONLY, 1L);
  hc_curl_opts(c, w->h);
  curl_easy_setopt(w->h, CURLOPT_CONNECTTIMEOUT_MS, 30000L);

  CURLcode rc = curl_easy_perform(w->h);
  curl_socket_t fd = CURL_SOCKET_BAD;
  if (rc == CURLE_OK)
    curl_easy_getinfo(w->h, CURLINFO_ACTIVESOCKET, &fd);
  if (rc != CURLE_OK || fd == CURL_SOCKET_BAD) {
    snprintf(err->message, sizeof err->message, "%s", curl_easy_strerror(rc));
    term_ws_close(w);
    return NULL;
  }
  w->fd = fd;

  if (!upgrade(w, c->url, c->key, path, err)) {
    term_ws_close(w);
    return NULL;
  }
  if (wslay_event_context_client_init(&w->ctx, &callbacks, w) != 0)
    abort();
  wslay_event_config_set_max_recv_msg_length(w->ctx, TERM_WS_MSG_MAX);
  return w;
}

int term_ws_fd(const struct term_ws *w) {
  return w->fd;
}

bool term_ws_want_write(const struct term_ws *w) {
  return wslay_event_want_write(w->ctx);
}

void term_ws_queue(struct term_ws *w, bool text, const void *data, size_t n) {
  struct wslay_event_msg m = {text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, data, n};
  wslay_event_queue_msg(w->ctx, &m);
}

size_t term_ws_queued(const struct term_ws *w) {
  return wslay_event_get_queued_msg_count(w->ctx);
}

int term_ws_flush(struct term_ws *w) {
  return wslay_event_send(w->ctx) == 0 ? 0 : -1;
}

int term_ws_read(struct term_ws *w, term_ws_msg_fn *fn, void *arg) {
  w->fn = fn;
  w->arg = arg;
  int r = wslay_event_recv(w->ctx);
  if (wslay_event_get_close_received(w->ctx) || (r != 0 && w->eof))
    return 1;
  return r == 0 ? 0 : -1;
}

void term_ws_close(struct term_ws *w) {
  if (!w)
    return;
  if (w->ctx) {
    if (!wslay_event_get_close_sent(w->ctx)) {
      wslay_event_queue_close(w->ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
      wslay_event_send(w->ctx);
    }
    wslay_event_context_free(w->ctx);
  }
  curl_easy_cleanup(w->h);
  free(w->early);
  free(w);
}
