/* libFuzzer target: whatever bytes a client sends hutch serve. A real
 * server (server.c) runs in this process on 127.0.0.1; each input is sent
 * on a fresh connection and the loop runs until the server has answered
 * and closed, or 2 s have passed. The server must neither crash nor leak
 * (ASan/UBSan), nor hang.
 *
 * "@K@" in an input becomes a tenant's API key, so that inputs reach past
 * authentication. That tenant may run no sandbox (quota 0): requests are
 * parsed, routed and checked in full, and refused before any sandbox is
 * made, so a run needs no more than the server itself. What the routes
 * behind a sandbox parse, the other targets feed to their handlers
 * against a fake sandbox (README.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "routes.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/serve/server_open.h"
#include "util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct server *srv;
static char key[128];
static char state_root[] = "/tmp/hutch-fuzz-XXXXXX"; /* mkdtemp's template */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path) < 0 ? -1 : 0;
}

/* libFuzzer ends with exit(): the state dir goes with it. */
static void remove_state(void) {
  nftw(state_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Send req, run the loop until the server closes or the time is up; what
 * it answered (malloc'd) in *out when out is not NULL. */
static void exchange(const char *req, size_t n, char **out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)srv->cfg.port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  /* libFuzzer's -timeout rings SIGALRM every second: a connect it
   * interrupts goes on by itself; wait for it. */
  int r = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof sa);
  if (r < 0 && (errno == EINTR || errno == EINPROGRESS)) {
    struct pollfd w = {.fd = fd, .events = POLLOUT};
    int soerr = 0;
    socklen_t len = sizeof soerr;
    while (poll(&w, 1, 1000) < 0 && errno == EINTR)
      ;
    r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0 ? 0 : -1;
  }
  if (r < 0) {
    fprintf(stderr, "fuzz: cannot reach the server: %s\n", strerror(errno));
    abort();
  }
  size_t sent = 0, got = 0;
  char *buf = NULL;
  uint64_t deadline = now_ns() + 2000000000ull;
  bool shut = false;
  while (now_ns() < deadline) {
    uv_run(srv->loop, UV_RUN_NOWAIT);
    if (sent < n) {
      ssize_t w = send(fd, req + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0)
        sent += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR)
        break;
    } else if (!shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0) {
      char chunk[4096];
      ssize_t got_now = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (got_now == 0 || (got_now < 0 && errno != EAGAIN && errno != EINTR))
        break;
      if (got_now > 0 && out) {
        buf = xrealloc(buf, got + (size_t)got_now + 1);
        memcpy(buf + got, chunk, (size_t)got_now);
        got += (size_t)got_now;
        buf[got] = '\0';
      }
    }
    uv_run(srv->loop, UV_RUN_NOWAIT);
  }
  close(fd);
  /* Let the server see the close and free the connection. */
  for (int i = 0; i < 10; i++)
    uv_run(srv->loop, UV_RUN_NOWAIT);
  if (out)
    *out = buf;
  else
    free(buf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  struct hutch_err err = {0};
  if (!mkdtemp(state_root))
    abort();
  atexit(remove_state);
  srv = server_new();
  free(srv->cfg.state_dir);
  srv->cfg.state_dir = xasprintf("%s/state", state_root);
  srv->cfg.port = 0;
  srv->cfg.pool_specs = xcalloc(2, sizeof(char *));
  srv->cfg.pool_specs[0] = xstrdup("host=0");
  if (server_open(srv, &routes_http, &routes_fronts, &err) < 0) {
    fprintf(stderr, "fuzz: %s\n", err.msg);
    abort();
  }
  /* The tenant whose key @K@ stands for, made through the API itself. */
  char admin[128] = "", *path = xasprintf("%s/admin.key", srv->cfg.state_dir);
  FILE *f = fopen(path, "r");
  if (!f || !fgets(admin, sizeof admin, f))
    abort();
  fclose(f);
  free(path);
  admin[strcspn(admin, "\n")] = '\0';
  const char *body = "{\"tenant\":\"fuzz\",\"max_sandboxes\":0,\"max_memory_mb\":0}";
  char *req = xasprintf("POST /v1/keys HTTP/1.1\r\nAuthorization: Bearer %s\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                        admin, strlen(body), body);
  char *answer = NULL;
  exchange(req, strlen(req), &answer);
  free(req);
  const char *k = answer ? strstr(answer, "\"key\":\"") : NULL;
  if (!k || sscanf(k + 7, "%100[^\"]", key) != 1)
    abort();
  free(answer);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Put the key in for every @K@. */
  size_t cap = size + 1, n = 0;
  char *req = xmalloc(cap);
  for (size_t i = 0; i < size; i++) {
    if (i + 3 <= size && memcmp(data + i, "@K@", 3) == 0) {
      size_t kl = strlen(key);
      cap += kl;
      req = xrealloc(req, cap);
      memcpy(req + n, key, kl);
      n += kl;
      i += 2;
    } else {
      req[n++] = (char)data[i];
    }
  }
  exchange(req, n, NULL);
  free(req);
  return 0;
}
