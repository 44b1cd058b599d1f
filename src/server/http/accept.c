/* The listening socket, accepted here rather than by uv_listen: libuv's
 * own answer to running out of descriptors drops pending connections
 * unanswered. Out of descriptors, this does as nginx does with one spare
 * held for the purpose: close it, accept, answer 503 with Retry-After,
 * close, reopen the spare. A client is told to come back, and the server
 * serves again as soon as descriptors are freed. */
#include "http/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/errors.h"
#include "http/http.h"

#define ACCEPT_BATCH 64
#define ACCEPT_RETRY_MS 100

/* The answer to a client accepted with the spare descriptor, written
 * before any connection exists: made once, its status from the table. */
static void overloaded_text(struct http_server *srv) {
  static const char body[] = "{\"error\":{\"code\":\"overloaded\",\"message\":\"the server is out "
                             "of file descriptors\"}}\n";
  int status = http_error_status(HUTCH_ERR_UNAVAILABLE);
  int n = snprintf(srv->overloaded, sizeof srv->overloaded,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                   "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                   status, http_status_text(status), sizeof body - 1, body);
  srv->noverloaded = n > 0 && (size_t)n < sizeof srv->overloaded ? (size_t)n : 0;
}

static void on_readable(uv_poll_t *h, int status, int events);

static void spare_open(struct http_server *srv) {
  if (srv->spare_fd < 0)
    srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Out of descriptors: answer one waiting client with the spare's. */
static bool refuse_one(struct http_server *srv) {
  if (srv->spare_fd < 0)
    return false;
  close(srv->spare_fd);
  srv->spare_fd = -1;
  int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    char sink[4096];
    (void)!send(fd, srv->overloaded, srv->noverloaded, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    /* What it sent unread would make the close a reset, and lose the answer. */
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
      ;
    close(fd);
    srv->refused++;
  }
  spare_open(srv);
  return fd >= 0;
}

static void on_retry(uv_timer_t *t) {
  struct http_server *srv = t->data;
  spare_open(srv);
  if (!srv->stopping)
    uv_poll_start(&srv->listener, UV_READABLE, on_readable);
}

static void on_readable(uv_poll_t *h, int status, int events) {
  struct http_server *srv = h->data;
  (void)events;
  if (status < 0 || srv->stopping)
    return;
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      http_accept(srv, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED)
      continue;
    if ((errno == EMFILE || errno == ENFILE) && refuse_one(srv))
      continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      /* Not even the spare: wait rather than spin on a readable socket. */
      uv_poll_stop(h);
      uv_timer_start(&srv->accept_retry, on_retry, ACCEPT_RETRY_MS, 0);
    }
    return;
  }
}

int http_accept_start(struct http_server *srv, const struct sockaddr *sa, socklen_t len,
                      struct hutch_err *err) {
  int one = 1;
  srv->listen_fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (srv->listen_fd < 0)
    return hutch_err_set(err, errno, "socket");
  if (setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
    return hutch_err_set(err, errno, "listening");
  if (bind(srv->listen_fd, sa, len) < 0)
    return hutch_err_set(err, errno, "listening");
  if (listen(srv->listen_fd, 511) < 0)
    return hutch_err_set(err, errno, "listening");

  spare_open(srv);
  overloaded_text(srv);

  uv_timer_init(srv->loop, &srv->accept_retry);
  srv->accept_retry.data = srv;
  uv_poll_init_socket(srv->loop, &srv->listener, srv->listen_fd);
  srv->listener.data = srv;
  uv_poll_start(&srv->listener, UV_READABLE, on_readable);
  return 0;
}

void http_accept_stop(struct http_server *srv) {
  if (!uv_is_closing((uv_handle_t *)&srv->listener))
    uv_close((uv_handle_t *)&srv->listener, NULL);
  if (!uv_is_closing((uv_handle_t *)&srv->accept_retry))
    uv_close((uv_handle_t *)&srv->accept_retry, NULL);
}

void http_accept_close(struct http_server *srv) {
  if (srv->listen_fd >= 0)
    close(srv->listen_fd);
  if (srv->spare_fd >= 0)
    close(srv->spare_fd);
  srv->listen_fd = srv->spare_fd = -1;
}
