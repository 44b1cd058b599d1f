/* The spawner: a process forked at hutch serve's start, single-threaded and
 * small, that clones each sandbox's first process for the server.
 *
 * A clone copies its parent's page tables (with the parent's memory map
 * write-locked meanwhile), its descriptor table, and on exec tears the copy
 * down again. Cloned from a server holding a thousand sandboxes (70 MB of
 * heap, 3000 descriptors) that was most of a create's extra time, and every
 * fault of the server's threads waited on the lock while it ran. Cloned
 * from here it copies a few pages and a few descriptors.
 *
 * A request carries the whole struct hutch_spawn (its config, strings and
 * arrays packed into one buffer, pointers as offsets into it) and every
 * descriptor the first process keeps (spawn.c, child_close_others), which
 * the spawner puts at the numbers they have in the server, so that the
 * first process runs exactly as if cloned there. The clone is made with
 * CLONE_PARENT: the sandbox is the server's child, reaped, waited for by
 * pidfd and signalled on the server's death as before; the spawner only
 * answers its pid and pidfd.
 *
 * The spawner is as privileged as the server, and only the server can
 * reach it: its socket is close-on-exec, and the first process closes
 * every descriptor but its own as its first act. It dies with the server
 * (PR_SET_PDEATHSIG, and end of stream on its socket). */
#include "spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gvisor.h"
#include "spawn.h"
#include "util.h"

/* What one request carries at most: more is cloned directly (spawn.c).
 * One SEQPACKET message must fit the socket's send buffer (wmem_default,
 * 208 KiB on a stock kernel): the blob stays well below it. */
#define SPAWNER_MAX_FDS 250
#define SPAWNER_MAX_BLOB (128 * 1024)

struct hutch_spawner {
  pthread_mutex_t lock; /* one request at a time on the socket */
  int sock;
  pid_t pid;
  bool gone;
};

struct spawner_req {
  int nice; /* the creating thread's: its clones start at it */
  int sync; /* the first process's end, by its number in the server */
  int nfd;
  int fdnum[SPAWNER_MAX_FDS]; /* the numbers the passed descriptors take */
  uint32_t len;               /* of the packed hutch_spawn that follows */
};

struct spawner_ans {
  int errnum; /* 0: pid runs, its pidfd passed; -1: nothing cloned */
  pid_t pid;
};

/* ---- packing: pointers become offsets into one buffer (0 stays NULL) ---- */

struct blob {
  char *buf;
  size_t len, cap;
};

static size_t put(struct blob *b, const void *p, size_t n) {
  size_t at = (b->len + 15) & ~(size_t)15;
  if (at + n > b->cap) {
    b->cap = (at + n) * 2;
    b->buf = xrealloc(b->buf, b->cap);
  }
  memset(b->buf + b->len, 0, at - b->len);
  memcpy(b->buf + at, p, n);
  b->len = at + n;
  return at;
}

static void *off(size_t at) {
  return (void *)(uintptr_t)at;
}
#define AT(b, at, type) ((type *)((b)->buf + (at)))

static const char *put_str(struct blob *b, const char *s) {
  return s ? off(put(b, s, strlen(s) + 1)) : NULL;
}

static const void *put_binds(struct blob *b, const struct hutch_bind *v, size_t n) {
  if (!v)
    return NULL;
  size_t at = put(b, v, n * sizeof *v);
  for (size_t i = 0; i < n; i++) {
    char *src = (char *)put_str(b, v[i].src), *dst = (char *)put_str(b, v[i].dst);
    AT(b, at, struct hutch_bind)[i].src = src;
    AT(b, at, struct hutch_bind)[i].dst = dst;
  }
  return off(at);
}

static size_t pack_cfg(struct blob *b, const struct hutch_sandbox_config *c) {
  size_t at = put(b, c, sizeof *c);
#define SET(field, value)                                    \
  do {                                                       \
    __typeof__(c->field) v_ = (__typeof__(c->field))(value); \
    AT(b, at, struct hutch_sandbox_config)->field = v_;      \
  } while (0)

  SET(state_dir, put_str(b, c->state_dir));
  SET(gvisor, c->gvisor ? off(put(b, c->gvisor, sizeof *c->gvisor)) : NULL);
  SET(rootfs, put_str(b, c->rootfs));
  SET(agent, put_str(b, c->agent));
  SET(binds, put_binds(b, c->binds, c->nbinds));
  SET(views, put_binds(b, c->views, c->nviews));

  if (c->layers) {
    size_t l = put(b, c->layers, c->nlayers * sizeof *c->layers);
    for (size_t i = 0; i < c->nlayers; i++) {
      const char *s = put_str(b, c->layers[i]);
      AT(b, l, const char *)[i] = s;
    }
    SET(layers, off(l));
  }

  if (c->volumes) {
    size_t v = put(b, c->volumes, c->nvolumes * sizeof *c->volumes);
    for (size_t i = 0; i < c->nvolumes; i++) {
      const char *dev = put_str(b, c->volumes[i].device), *dst = put_str(b, c->volumes[i].dst);
      AT(b, v, struct hutch_volume)[i].device = dev;
      AT(b, v, struct hutch_volume)[i].dst = dst;
    }
    SET(volumes, off(v));
  }

  SET(listen_dir, put_str(b, c->listen_dir));
  SET(spawner, NULL);
  SET(cg_root, NULL);
#undef SET
  return at;
}

/* The first field of the buffer is the hutch_spawn. */
static void pack(struct blob *b, const struct hutch_spawn *s) {
  put(b, "", 1); /* offset 0 is NULL */
  size_t at = put(b, s, sizeof *s);
  struct hutch_rootfs r = s->rootfs;
  const struct hutch_sandbox_config *c = r.cfg;
  r.cfg = off(pack_cfg(b, c));
  r.template_dir = put_str(b, r.template_dir);
  r.agent_path = put_str(b, r.agent_path);
  r.hostname = put_str(b, r.hostname);
  r.bind_fds = r.bind_fds ? off(put(b, r.bind_fds, 2 * c->nbinds * sizeof(int))) : NULL;
  r.layer_fds = r.layer_fds ? off(put(b, r.layer_fds, c->nlayers * sizeof(int))) : NULL;
  const struct hutch_cgroup *cg = off(put(b, s->cg, sizeof *s->cg));
  const struct hutch_cgroup *agent_cg =
      s->agent_cg == s->cg ? cg : off(put(b, s->agent_cg, sizeof *s->agent_cg));
  AT(b, at, struct hutch_spawn)->rootfs = r;
  AT(b, at, struct hutch_spawn)->cg = cg;
  AT(b, at, struct hutch_spawn)->agent_cg = agent_cg;
}

/* The spawner's side: offsets back to pointers, each checked to fall in
 * the buffer. */
#define REL(p)                                                 \
  do {                                                         \
    if ((p) && (uintptr_t)(p) >= len)                          \
      return 0;                                                \
    (p) = (p) ? (__typeof__(p))(base + (uintptr_t)(p)) : NULL; \
  } while (0)

static bool rel_binds(char *base, size_t len, const struct hutch_bind *binds, size_t n) {
  struct hutch_bind *v = (struct hutch_bind *)binds;
  for (size_t i = 0; v && i < n; i++) {
    REL(v[i].src);
    REL(v[i].dst);
  }
  return true;
}

static struct hutch_spawn *unpack(char *base, size_t len) {
  struct hutch_spawn *s = (struct hutch_spawn *)(base + 16);
  if (len < 16 + sizeof *s)
    return NULL;

  struct hutch_rootfs *r = &s->rootfs;
  REL(r->cfg);
  REL(r->template_dir);
  REL(r->agent_path);
  REL(r->hostname);
  REL(r->bind_fds);
  REL(r->layer_fds);
  REL(s->cg);
  REL(s->agent_cg);

  struct hutch_sandbox_config *c = (struct hutch_sandbox_config *)r->cfg;
  REL(c->state_dir);
  REL(c->gvisor);
  REL(c->rootfs);
  REL(c->agent);
  REL(c->listen_dir);
  REL(c->binds);
  REL(c->views);
  if (!rel_binds(base, len, c->binds, c->nbinds))
    return NULL;
  if (!rel_binds(base, len, c->views, c->nviews))
    return NULL;
  REL(c->layers);
  for (size_t i = 0; c->layers && i < c->nlayers; i++)
    REL(((const char **)c->layers)[i]);
  REL(c->volumes);
  for (size_t i = 0; c->volumes && i < c->nvolumes; i++) {
    REL(((struct hutch_volume *)c->volumes)[i].device);
    REL(((struct hutch_volume *)c->volumes)[i].dst);
  }
  return s;
}

/* ---- the server's side ---- */

/* Every descriptor the first process keeps (child_close_others). */
static int keep_fds(const struct hutch_spawn *s, int sync, int *fds) {
  const struct hutch_rootfs *r = &s->rootfs;
  size_t need = 4 + 2 * HUTCH_CG_MAXH + 2 * r->cfg->nbinds + r->cfg->nlayers;
  if (need > SPAWNER_MAX_FDS)
    return -1;
  int n = 0;
  fds[n++] = sync;
  fds[n++] = s->conn_fd;
  if (s->listen_fd >= 0)
    fds[n++] = s->listen_fd;
  if (r->range_userns >= 0)
    fds[n++] = r->range_userns;
  for (int i = 0; i < s->cg->nfd; i++)
    fds[n++] = s->cg->fd[i];
  for (int i = 0; s->agent_cg != s->cg && i < s->agent_cg->nfd; i++)
    fds[n++] = s->agent_cg->fd[i];
  for (size_t i = 0; r->bind_fds && i < 2 * r->cfg->nbinds; i++)
    fds[n++] = r->bind_fds[i];
  for (size_t i = 0; r->layer_fds && i < r->cfg->nlayers; i++)
    fds[n++] = r->layer_fds[i];
  return n;
}

/* The request sent, with its descriptors: 0, or 1 when it could not be
 * (nothing was cloned). */
static int send_request(struct hutch_spawner *sp, struct spawner_req *req, struct blob *b) {
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(SPAWNER_MAX_FDS * sizeof(int))];
  } u = {0};
  struct iovec iov[2] = {{req, sizeof *req}, {b->buf, b->len}};
  struct msghdr m = {.msg_iov = iov,
                     .msg_iovlen = 2,
                     .msg_control = u.buf,
                     .msg_controllen = CMSG_SPACE(req->nfd * sizeof(int))};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(req->nfd * sizeof(int));
  memcpy(CMSG_DATA(h), req->fdnum, req->nfd * sizeof(int));
  if (sendmsg(sp->sock, &m, MSG_NOSIGNAL) < 0) {
    /* Nothing was cloned: this create clones directly. Only a spawner
     * that has ended turns it off for good; a request it cannot take now
     * (ENOBUFS, ENOMEM) does not. */
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
      sp->gone = true;
    return 1;
  }
  return 0;
}

/* The spawner's answer: 0 with s->pid and s->pidfd set, 1 when nothing
 * was cloned, -1 with err set. */
static int recv_answer(struct hutch_spawner *sp, struct hutch_spawn *s, struct hutch_err *err) {
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u = {0};
  struct spawner_ans ans;
  struct iovec ai = {&ans, sizeof ans};
  struct msghdr am = {.msg_iov = &ai,
                      .msg_iovlen = 1,
                      .msg_control = u.buf,
                      .msg_controllen = CMSG_SPACE(sizeof(int))};

  ssize_t n;
  while ((n = recvmsg(sp->sock, &am, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
    ;
  if (n != sizeof ans) {
    sp->gone = true;
    return hutch_err_set(err, n < 0 ? errno : EPIPE, "the spawner ended");
  }
  if (ans.errnum < 0)
    return 1; /* nothing was cloned: this create clones directly */
  if (ans.errnum)
    return hutch_err_set(err, ans.errnum, "clone sandbox");

  struct cmsghdr *h = CMSG_FIRSTHDR(&am);
  if (!h || h->cmsg_type != SCM_RIGHTS || h->cmsg_len != CMSG_LEN(sizeof(int))) {
    /* It runs (our child: CLONE_PARENT), but with no pidfd nothing would
     * wait for it: end it here rather than leave it to the server's exit. */
    if (ans.pid > 0) {
      kill(ans.pid, SIGKILL);
      waitpid(ans.pid, NULL, 0);
    }
    return hutch_err_set(err, EPROTO, "the spawner sent no pidfd");
  }
  memcpy(&s->pidfd, CMSG_DATA(h), sizeof(int));
  s->pid = ans.pid;
  return 0;
}

static int request(struct hutch_spawner *sp, struct spawner_req *req, struct blob *b,
                   struct hutch_spawn *s, struct hutch_err *err) {
  int r = send_request(sp, req, b);
  if (r != 0)
    return r;
  return recv_answer(sp, s, err);
}

int hutch_spawner_clone(struct hutch_spawner *sp, struct hutch_spawn *s, int sync,
                        struct hutch_err *err) {
  struct spawner_req req = {.sync = sync};
  if ((req.nfd = keep_fds(s, sync, req.fdnum)) < 0)
    return 1;

  struct blob b = {0};
  pack(&b, s);
  int r = 1;
  if (b.len <= SPAWNER_MAX_BLOB) {
    req.len = (uint32_t)b.len;
    errno = 0;
    req.nice = getpriority(PRIO_PROCESS, 0); /* this thread's */
    if (req.nice == -1 && errno)
      req.nice = 0;
    pthread_mutex_lock(&sp->lock); /* gone, too, is read and set under it */
    r = sp->gone ? 1 : request(sp, &req, &b, s, err);
    pthread_mutex_unlock(&sp->lock);
  }
  free(b.buf);
  return r;
}

/* ---- the spawner's side ---- */

/* The passed descriptors at the server's numbers: first all above every
 * target and the socket, so that no dup3 replaces one still to be placed. */
static int place_fds(int *sock, const struct spawner_req *req, int *got, bool *placed) {
  int top = *sock;
  for (int i = 0; i < req->nfd; i++)
    top = req->fdnum[i] > top ? req->fdnum[i] : top;
  int s = fcntl(*sock, F_DUPFD_CLOEXEC, top + 1);
  if (s < 0)
    return -1;
  close(*sock);
  *sock = s;
  *placed = true; /* from here the targets are ours to close */
  for (int i = 0; i < req->nfd; i++) {
    int fd = fcntl(got[i], F_DUPFD_CLOEXEC, top + 2);
    if (fd < 0)
      return -1;
    close(got[i]);
    got[i] = fd;
  }
  for (int i = 0; i < req->nfd; i++)
    if (dup3(got[i], req->fdnum[i], O_CLOEXEC) < 0)
      return -1;
  return 0;
}

/* What a request left: the received descriptors, and their copies at the
 * server's numbers once placed. */
static void close_got(const struct spawner_req *req, int *got, int ngot, bool placed) {
  for (int i = 0; i < ngot; i++) {
    close(got[i]);
    if (placed)
      close(req->fdnum[i]);
  }
}

/* The clone a request asks for: 0 with *pid running and *pidfd its pidfd,
 * an errno value when the clone failed, or -1 when nothing was cloned (a
 * request it could not take, descriptors it could not place): the server
 * clones this one itself. */
static int clone_requested(int *sock, const struct spawner_req *req, char *buf, size_t len,
                           int *got, int ngot, bool *placed, pid_t *pid, int *pidfd) {
  if (ngot != req->nfd || req->len != len)
    return -1;
  struct hutch_spawn *s = unpack(buf, len);
  if (!s)
    return -1;
  if (place_fds(sock, req, got, placed) < 0)
    return -1;

  /* Its clones start at the creating thread's priority (a pool refill's
   * is lower), as cloned there. */
  int base_nice = getpriority(PRIO_PROCESS, 0);
  if (req->nice != base_nice)
    setpriority(PRIO_PROCESS, 0, req->nice);
  *pid = hutch_spawn_clone(s, req->sync, CLONE_PARENT, pidfd);
  int e = *pid < 0 ? errno : 0;
  if (req->nice != base_nice)
    setpriority(PRIO_PROCESS, 0, base_nice);
  return e;
}

/* The answer to a request: {e, pid}, and pid's pidfd when there is one. */
static int answer(int sock, int e, pid_t pid, int pidfd) {
  struct spawner_ans ans = {e, pid};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u = {0};
  struct iovec iov = {&ans, sizeof ans};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (pidfd >= 0) {
    m.msg_control = u.buf;
    m.msg_controllen = sizeof u.buf;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &pidfd, sizeof(int));
  }
  return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static int serve_one(int *sock, struct spawner_req *req, char *buf, size_t len, int *got,
                     int ngot) {
  int pidfd = -1;
  pid_t pid = -1;
  bool placed = false;
  int e = clone_requested(sock, req, buf, len, got, ngot, &placed, &pid, &pidfd);
  close_got(req, got, ngot, placed);

  int r = answer(*sock, e, pid, pidfd);
  if (pidfd >= 0)
    close(pidfd);
  return r;
}

static void __attribute__((noreturn)) spawner_main(int sock, pid_t server) {
  int keep[4] = {0, 1, 2, sock};
  hutch_close_others(keep, 4);
  prctl(PR_SET_NAME, "hutch-spawner", 0, 0, 0);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
    _exit(0);
  /* The server may have ended before the prctl: nothing would end us. */
  if (getppid() != server)
    _exit(0);

  /* The buffer the offsets are made against: aligned as packed. */
  char *blob = xmalloc(SPAWNER_MAX_BLOB);
  for (;;) {
    union {
      struct cmsghdr h;
      char buf[CMSG_SPACE(SPAWNER_MAX_FDS * sizeof(int))];
    } u;
    struct spawner_req req;
    struct iovec iov[2] = {{&req, sizeof req}, {blob, SPAWNER_MAX_BLOB}};
    struct msghdr m = {
        .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (n == 0 || (n < 0 && errno != EINTR))
      _exit(0);
    if (n < 0)
      continue;

    int got[SPAWNER_MAX_FDS], ngot = 0;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (h && h->cmsg_type == SCM_RIGHTS) {
      ngot = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      memcpy(got, CMSG_DATA(h), ngot * sizeof(int));
    }

    size_t len = 0;
    if ((size_t)n < sizeof req || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
      req.nfd = -1;
    else
      len = (size_t)n - sizeof req;
    if (req.nfd < 0 || req.nfd > SPAWNER_MAX_FDS)
      req.nfd = 0;

    if (serve_one(&sock, &req, blob, len, got, ngot) < 0)
      _exit(0);
  }
}

struct hutch_spawner *hutch_spawner_start(struct hutch_err *err) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    hutch_err_set(err, errno, "socketpair");
    return NULL;
  }

  pid_t server = getpid();
  /* The system call, not glibc's fork (spawn.c's set_ids): no handler of
   * the caller's runs in the spawner. */
  pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0) {
    close(sv[0]);
    spawner_main(sv[1], server);
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    hutch_err_set(err, errno, "fork the spawner");
    return NULL;
  }

  struct hutch_spawner *sp = xcalloc(1, sizeof *sp);
  pthread_mutex_init(&sp->lock, NULL);
  sp->sock = sv[0];
  sp->pid = pid;
  return sp;
}

void hutch_spawner_free(struct hutch_spawner *sp) {
  if (!sp)
    return;
  close(sp->sock); /* end of stream: it exits */
  while (waitpid(sp->pid, NULL, 0) < 0 && errno == EINTR)
    ;
  pthread_mutex_destroy(&sp->lock);
  free(sp);
}
