/* A RUN step's way out (build.h, --allow-out): the same egress policy as a
 * server sandbox's (src/server/net/netpolicy.c, docs/network.md), served
 * by a small HTTP proxy of the builder's own. It listens at 127.0.0.1:3128
 * inside the step's network namespace (the namespace holds only its
 * loopback: this is the only way out), takes CONNECT host:port and plain
 * HTTP requests with an absolute URL, checks the host against the
 * allow-list, resolves it on the host, checks every address against the
 * allow-list and the deny floor (the host's loopback and own addresses,
 * private networks, link-local and metadata... unless --egress-permit
 * lifts a block), connects from the host and relays. One thread accepts,
 * one thread serves each connection; all end with the step. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "net/netpolicy.h"
#include "sandbox.h"
#include "util.h"

#define EGRESS_PORT 3128
#define HEAD_MAX 16384
#define HEAD_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MS 10000
#define EGRESS_MAX_CONNS 64

struct egress {
  struct netpolicy policy;
  struct np_floor floor;
  int listen_fd;
  int stop[2]; /* the write end closed: every thread returns */
  pthread_t acceptor;
  bool accepting;
  pthread_mutex_t mu;
  pthread_t conns[EGRESS_MAX_CONNS];
  size_t nconns;
};

struct conn {
  struct egress *e;
  int fd;
};

int build_egress_policy(struct build *b, const char *allow, const char *permit,
                        struct hutch_err *err) {
  json_t *list = json_array();
  _cleanup_free_ char *copy = xstrdup(allow);
  for (char *save, *h = strtok_r(copy, ",", &save); h; h = strtok_r(NULL, ",", &save))
    json_array_append_new(list, json_string(h));
  json_t *net = json_pack("{s:s,s:o}", "mode", "allowlist", "allow", list);
  char why[256];
  b->egress = xcalloc(1, sizeof *b->egress);
  int r = netpolicy_parse(net, NULL, &b->egress->policy, why, sizeof why);
  json_decref(net);
  if (r < 0)
    return hutch_err_invalid(err, "--allow-out: %s", why);

  _cleanup_free_ char *pcopy = permit ? xstrdup(permit) : NULL;
  char *save = NULL;
  for (char *p = pcopy ? strtok_r(pcopy, ",", &save) : NULL; p; p = strtok_r(NULL, ",", &save))
    if (netpolicy_floor_add(&b->egress->floor, true, p, why, sizeof why) < 0)
      return hutch_err_invalid(err, "--egress-permit: %s", why);
  return 0;
}

void build_egress_free(struct build *b) {
  if (!b->egress)
    return;
  netpolicy_free(&b->egress->policy);
  netpolicy_floor_free(&b->egress->floor);
  free(b->egress);
}

static bool host_own(const struct sockaddr *sa) {
  struct ifaddrs *all;
  int family, ofamily;
  unsigned char a[16], o[16];
  bool own = false;
  if (!netpolicy_addr_of(sa, &family, a) || getifaddrs(&all) < 0)
    return false;
  for (struct ifaddrs *i = all; i && !own; i = i->ifa_next)
    own = i->ifa_addr && netpolicy_addr_of(i->ifa_addr, &ofamily, o) && ofamily == family &&
          memcmp(a, o, 16) == 0;
  freeifaddrs(all);
  return own;
}

static void answer(int fd, int status, const char *reason, const char *why) {
  char buf[512];
  int n = snprintf(buf, sizeof buf,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                   "Content-Length: %zu\r\n\r\n%s\n",
                   status, reason, strlen(why) + 1, why);
  (void)!write_all(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Wait for fd (events) or the stop pipe; false when stopping or timed out. */
static bool wait_for(struct egress *e, int fd, short events, int ms) {
  struct pollfd p[2] = {{fd, events, 0}, {e->stop[0], POLLIN, 0}};
  int r;
  while ((r = poll(p, 2, ms)) < 0 && errno == EINTR)
    ;
  return r > 0 && !p[1].revents;
}

/* fd (non-blocking) connected to ai's address within CONNECT_TIMEOUT_MS,
 * unless the step stops first: whether it is. */
static bool connect_within(struct egress *e, int fd, const struct addrinfo *ai) {
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
    return false;
  if (!wait_for(e, fd, POLLOUT, CONNECT_TIMEOUT_MS))
    return false;
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
    return false;
  return err == 0;
}

static int connect_to(struct egress *e, const char *host, uint16_t port, enum np_match m, char *why,
                      size_t whylen) {
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
  if (getaddrinfo(host, service, &hints, &res) != 0) {
    snprintf(why, whylen, "cannot resolve %s", host);
    return -1;
  }

  int fd = -1;
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
    struct np_target t = {.addr = ai->ai_addr, .host_own = host_own(ai->ai_addr)};
    if (!netpolicy_check_addr(&e->policy, m, ai->ai_addr, port, t.host_own, why, whylen) ||
        !netpolicy_floor_check(&e->floor, host, port, &t, why, whylen))
      continue;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    if (!connect_within(e, fd, ai)) {
      snprintf(why, whylen, "%s:%u refused or did not answer", host, port);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  return fd;
}

/* Both ways until either side ends. */
static void relay(struct egress *e, int a, int b) {
  char buf[65536];
  for (;;) {
    struct pollfd p[3] = {{a, POLLIN, 0}, {b, POLLIN, 0}, {e->stop[0], POLLIN, 0}};
    if (poll(p, 3, -1) < 0 && errno != EINTR)
      return;
    if (p[2].revents)
      return;
    for (int i = 0; i < 2; i++) {
      if (!p[i].revents)
        continue;
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (n <= 0 || write_all(p[1 - i].fd, buf, (size_t)n) < 0)
        return;
    }
  }
}

/* The request's head (up to the blank line), and what came after it. */
static ssize_t read_head(struct egress *e, int fd, char *buf, size_t *extra) {
  size_t have = 0;
  while (have < HEAD_MAX - 1) {
    if (!wait_for(e, fd, POLLIN, HEAD_TIMEOUT_MS))
      return -1;
    ssize_t n = read(fd, buf + have, HEAD_MAX - 1 - have);
    if (n <= 0)
      return -1;
    have += (size_t)n;
    buf[have] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    if (end) {
      *extra = have - (size_t)(end + 4 - buf);
      return end + 4 - buf;
    }
  }
  return -1;
}

/* "CONNECT host:port" or "METHOD http://host[:port]/path": host, port and
 * where the path starts (NULL for CONNECT). */
static bool parse_target(char *line, char host[NETPOLICY_HOST_MAX + 1], uint16_t *port,
                         char **method_end, char **path) {
  char *sp = strchr(line, ' ');
  if (!sp)
    return false;
  *method_end = sp;

  char *t = sp + 1, *hs = t;
  bool connect = sp - line == 7 && strncmp(line, "CONNECT", 7) == 0;
  *path = NULL;
  *port = connect ? 443 : 80;
  if (!connect) {
    if (strncasecmp(t, "http://", 7) != 0)
      return false;
    hs = t + 7;
  }
  size_t hl = strcspn(hs, connect ? " " : "/ ");
  char *end = hs + hl;
  if (!connect)
    *path = end;

  char raw[NETPOLICY_HOST_MAX + 8];
  if (hl == 0 || hl >= sizeof raw)
    return false;
  memcpy(raw, hs, hl), raw[hl] = '\0';
  char *colon = raw[0] == '[' ? strstr(raw, "]:") : strrchr(raw, ':');
  if (colon) {
    colon += raw[0] == '[';
    uint64_t p;
    if (!parse_u64(colon + 1, &p) || p == 0 || p > 65535)
      return false;
    *port = (uint16_t)p;
    *colon = '\0';
  }
  return netpolicy_host_ok(raw, host);
}

/* What the client sent (head, hlen bytes of it, and extra bytes after it),
 * passed on to out: for CONNECT, the answer to the client; else the
 * request line in origin form, and the rest as sent. */
static int forward_request(int fd, int out, char *head, ssize_t hlen, char *eol,
                           const char *method_end, const char *path, size_t extra) {
  if (!path) {
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (write_all(fd, ok, sizeof ok - 1) < 0)
      return -1;
  } else {
    *eol = '\r';
    if (write_all(out, head, (size_t)(method_end + 1 - head)) < 0)
      return -1;
    /* "http://host HTTP/1.1": the root. */
    if (*path != '/' && write_all(out, "/", 1) < 0)
      return -1;
    if (write_all(out, path, (size_t)(head + hlen - path)) < 0)
      return -1;
  }

  if (extra && write_all(out, head + hlen, extra) < 0)
    return -1;
  return 0;
}

static void serve(struct egress *e, int fd) {
  char head[HEAD_MAX], host[NETPOLICY_HOST_MAX + 1], why[384] = "";
  size_t extra = 0;
  ssize_t hlen = read_head(e, fd, head, &extra);
  if (hlen < 0)
    return;

  char *eol = strstr(head, "\r\n");
  *eol = '\0';
  uint16_t port;
  char *method_end, *path;
  if (!parse_target(head, host, &port, &method_end, &path)) {
    answer(fd, 400, "Bad Request",
           "hutch build proxy: expected CONNECT host:port or an http:// URL");
    return;
  }

  enum np_match m = netpolicy_check_host(&e->policy, host, port);
  int out = -1;
  if (m != NP_DENIED)
    out = connect_to(e, host, port, m, why, sizeof why);
  if (out < 0) {
    _cleanup_free_ char *msg = xasprintf("hutch build proxy: %s:%u is not allowed%s%s", host, port,
                                         why[0] ? ": " : " (--allow-out)", why);
    answer(fd, 403, "Forbidden", msg);
    return;
  }

  if (forward_request(fd, out, head, hlen, eol, method_end, path, extra) == 0)
    relay(e, fd, out);
  close(out);
}

static void *conn_main(void *arg) {
  struct conn *c = arg;
  serve(c->e, c->fd);
  close(c->fd);
  free(c);
  return NULL;
}

static void *accept_main(void *arg) {
  struct egress *e = arg;
  while (wait_for(e, e->listen_fd, POLLIN, -1)) {
    int fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    pthread_mutex_lock(&e->mu);
    struct conn *c = xmalloc(sizeof *c);
    *c = (struct conn){e, fd};
    if (e->nconns == EGRESS_MAX_CONNS ||
        pthread_create(&e->conns[e->nconns], NULL, conn_main, c) != 0) {
      close(fd);
      free(c);
    } else {
      e->nconns++;
    }
    pthread_mutex_unlock(&e->mu);
  }
  return NULL;
}

int build_egress_start(struct build *b, struct hutch_sandbox *sb, struct hutch_err *err) {
  struct egress *e = b->egress;
  e->listen_fd = e->stop[0] = e->stop[1] = -1;
  e->nconns = 0;
  _cleanup_close_ int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0)
    return hutch_err_set(err, errno, "open our network namespace");
  e->listen_fd = hutch_sandbox_socket(sb, own, AF_INET, SOCK_STREAM, err);
  if (e->listen_fd < 0)
    return hutch_err_wrap(err, "the build proxy");

  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons(EGRESS_PORT),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(e->listen_fd, (struct sockaddr *)&a, sizeof a) < 0)
    return hutch_err_set(err, errno, "the build proxy: listen");
  if (listen(e->listen_fd, 64) < 0)
    return hutch_err_set(err, errno, "the build proxy: listen");
  if (pipe2(e->stop, O_CLOEXEC) < 0)
    return hutch_err_set(err, errno, "the build proxy: listen");

  pthread_mutex_init(&e->mu, NULL);
  if (pthread_create(&e->acceptor, NULL, accept_main, e) != 0)
    return hutch_err_set(err, EAGAIN, "the build proxy: thread");
  e->accepting = true;
  return 0;
}

void build_egress_stop(struct build *b) {
  struct egress *e = b->egress;
  if (!e)
    return;
  if (e->stop[1] >= 0)
    close(e->stop[1]);
  if (e->accepting)
    pthread_join(e->acceptor, NULL);
  for (size_t i = 0; i < e->nconns; i++)
    pthread_join(e->conns[i], NULL);
  if (e->accepting)
    pthread_mutex_destroy(&e->mu);
  e->accepting = false;
  e->nconns = 0;
  if (e->stop[0] >= 0)
    close(e->stop[0]);
  if (e->listen_fd >= 0)
    close(e->listen_fd);
  e->listen_fd = e->stop[0] = e->stop[1] = -1;
}

char **build_egress_env(char **env) {
  static const char *const vars[] = {
      "HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
      "http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
      "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1"};
  size_t n = 0;
  while (env[n])
    n++;
  env = xrealloc(env, (n + ARRAY_SIZE(vars) + 1) * sizeof *env);
  for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
    size_t kl = strcspn(vars[i], "=") + 1;
    bool set = false;
    for (size_t k = 0; k < n; k++)
      set |= strncmp(env[k], vars[i], kl) == 0;
    if (!set)
      env[n++] = xstrdup(vars[i]);
  }
  env[n] = NULL;
  return env;
}
