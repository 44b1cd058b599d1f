/* Making a sandbox off the loop (sbx_make.h): the sandbox cloned on a
 * thread of a create lane, then wrapped on the loop (its agent's connection,
 * tokens, its egress proxy) and handed to the caller. */
#include "core/life/sbx_make.h"

#include <errno.h>
#include <linux/capability.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "backend.h"
#include "util.h"
#include "core/run/contexts.h"
#include "core/egress/network.h"
#include "core/run/procs.h"
#include "core/life/snapshots.h"
#include "core/tenancy/usage.h"
#include "state/store.h"
#include "core/egress/egress.h"
#include "core/life/sbx_teardown.h"

/* A sandbox being made: hutch_sandbox_create runs on a thread of the
 * pool (offload.c, --create-lanes at once) with a copy of the config; the
 * caller keeps what the config points to (layers, volumes) until made is
 * called.
 *
 * Why libhutch may run on a thread beside the loop:
 *  - The sandbox's first process is cloned (spawn.c, clone3) from a
 *    process with other threads, so until its exec it may only do what is
 *    safe after a fork: a lock another thread held at the clone stays held
 *    in it forever. Its path (rootfs.c, the cgroup's enter_self, the
 *    seccomp install) makes syscalls and formats into stack buffers; it
 *    allocates nothing (rootfs.c's one strdup is a stack copy now) and
 *    takes no stdio lock. It sets its ids with raw system calls: glibc's
 *    setresuid and setgroups signal every thread the process had and wait
 *    for those starting or ending, which in the clone never answer. Only
 *    on an error does it call strerror (glibc: a read lock on the
 *    locale's state, which no thread of hutch serve ever write-locks,
 *    since nothing calls setlocale). The id-map helper closes every fd
 *    but its pipe's end, reads and _exits; the network namespace's is a
 *    thread that unshares, opens and ends (netns.c). Each create's clones
 *    close what other creates hold first (offload.h), so creates run
 *    --create-lanes at once. Under hutch serve the clone is the spawner's
 *    (spawner.c), which has one thread: the rules above still hold for a
 *    request it cannot carry, cloned here.
 *  - Slots (slot.c) are claimed by mkdir, atomic between threads as
 *    between processes, then flock on an fd of their own: flock locks
 *    belong to the open file, so the collector (hutch_slot_gc, on this thread
 *    or the loop's) and another create conflict as other processes would.
 *  - hutch_cgroup_cap_root reads the subtree's ceiling and writes the same
 *    value if it is higher: two at once write the same number. Nothing in
 *    src/lib keeps mutable static state; the template is built beside and
 *    renamed into place, so two builders cannot clash; nothing changes the
 *    process's working directory, umask or namespaces but the cloned
 *    child (hutch_sandbox_socket's setns and the netns helper's unshare
 *    are per thread: the one on the loop, the other on a thread that
 *    ends).
 *  - The agent must not inherit this thread's signal mask: libuv's pool
 *    threads are made with the mask of the loop's thread, which blocks
 *    nothing. */
struct making {
  struct offload o;
  bool ahead;       /* a pool's: made at SBX_AHEAD_NICE, in the background */
  char *owner;      /* the tenant whose create it is: turns on the lane (offload.c) */
  uint64_t took_ns; /* on its thread */
  struct hutch_sandbox_config cfg;
  struct hutch_bind kernels;
  char template[SERVE_TEMPLATE_MAX + 1];
  struct hutch_sandbox *hs;
  const struct hutch_cgroup *cg_root; /* the server's, read only */
  struct hutch_err err;
  int r;
  sbx_made_fn made;
  void *arg;
};

/* Whether a thread may raise its priority again (CAP_SYS_NICE): without
 * it, a refill is made at the server's own, rather than leave the thread,
 * or the agent, below it. */
static bool may_renice(void) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0)
    return false;
  return (d[CAP_SYS_NICE / 32].effective >> (CAP_SYS_NICE % 32)) & 1;
}

/* A sandbox made ahead of demand yields the CPUs to requests: its thread,
 * and what it clones, run SBX_AHEAD_NICE steps below the process (nice is
 * per thread on Linux); the sandbox's first process returns to the
 * process's own before the agent starts (spawn.c), so a sandbox taken from
 * a pool runs as one made for the request. The thread gets its priority
 * back before it takes other work. */
static void making_run(struct offload *o) {
  struct making *m = OFFLOAD_JOB(o, struct making);
  pid_t tid = gettid();
  int nice = 0;
  bool renice = m->ahead && may_renice();

  if (renice) {
    errno = 0;
    nice = getpriority(PRIO_PROCESS, (id_t)getpid());
    if (nice == -1 && errno)
      nice = 0;
    setpriority(PRIO_PROCESS, (id_t)tid, nice + SBX_AHEAD_NICE > 19 ? 19 : nice + SBX_AHEAD_NICE);
  }

  uint64_t t0 = now_ns();
  m->r = hutch_sandbox_create(&m->cfg, &m->hs, &m->err);
  if (m->r == 0)
    hutch_shell_few_fds(m->hs, m->cg_root);
  m->took_ns = now_ns() - t0;

  if (renice)
    setpriority(PRIO_PROCESS, (id_t)tid, nice);
}

/* The rest, on the loop: the agent's connection, tokens, the proxy. */
static struct sbx *sbx_wrap(struct server *srv, struct making *m) {
  const struct hutch_sandbox_config *cfg = &m->cfg;
  struct sbx *sb = xcalloc(1, sizeof *sb);
  sb->pin = -1;
  sb->hs = m->hs;
  sb->srv = srv;
  memcpy(sb->id, sb->hs->id, sizeof sb->id);
  random_hex(sb->token, SERVE_TOKEN_LEN);
  str_copy(sb->template, sizeof sb->template, m->template);
  sb->metadata = json_object();
  sb->env = json_object();
  sb->memory_mb = cfg->memory_bytes >> 20;
  sb->disk_mb = cfg->disk_bytes >> 20;
  sb->pids = cfg->pids;
  sb->cpu_milli = cfg->cpu_milli;

  if (agentc_init(&sb->ac, srv->loop, sb->hs->conn_fd) < 0) {
    json_decref(sb->metadata);
    json_decref(sb->env);
    free(sb);
    hutch_err_set(&m->err, 0, "watching the agent connection failed");
    return NULL;
  }
  sb->ac.on_dead = sbx_agent_dead;
  sb->ac.on_escapes = escapes_update;

  random_hex(sb->traffic_token, SERVE_TOKEN_LEN);
  struct hutch_err ignored;
  network_restore(sb, NULL, NULL, &ignored); /* Mode none with no secrets cannot fail. */
  egress_start(sb);
  return sb;
}

static void making_done(struct offload *o) {
  struct making *m = OFFLOAD_JOB(o, struct making);
  struct server *srv = o->srv;
  struct sbx *sb = NULL;

  /* What a create takes on its lane, for admission (sbx_create.c): a
   * moving average of requests' own, each weighing an eighth. */
  if (!m->ahead && m->r == 0)
    srv->create_ns = srv->create_ns ? (7 * srv->create_ns + m->took_ns) / 8 : m->took_ns;

  if (m->r == 0 && srv->stopping) {
    hutch_err_set(&m->err, 0, "the server is stopping");
  } else if (m->r == 0) {
    sb = sbx_wrap(srv, m);
    m->hs = sb ? NULL : m->hs;
  }
  if (!sb && m->hs)
    sbx_teardown(srv, m->hs, NULL);

  m->made(srv, sb, &m->err, m->arg);
  free(m->owner);
  free(m);
}

static void make(struct server *srv, const struct hutch_sandbox_config *cfg, const char *template,
                 const char *owner, sbx_made_fn made, void *arg) {
  struct making *m = xcalloc(1, sizeof *m);
  m->ahead = !owner;
  m->owner = owner ? xstrdup(owner) : NULL;

  /* The server's sandboxes outlive it, to be taken over when it starts
   * again (sbx_adopt_all): their agents listen for it. */
  m->cfg = *cfg;
  m->cfg.die_with_parent = false;
  if (!m->cfg.ptys)
    m->cfg.ptys = srv->cfg.sandbox_ptys;
  m->cfg.listen_dir = srv->agents_dir;
  m->cfg.gc_elsewhere = true; /* the reaper's hutch_shell_gc_host */
  m->cfg.spawner = srv->spawner;
  m->cfg.cg_root = &srv->cg_root;

  /* The code contexts' kernels (contexts.c): a view, not a bind, so
   * that no sandbox learns where hutch is installed. */
  m->kernels = (struct hutch_bind){srv->kernels_dir, SERVE_KERNELS_PATH, false};
  if (srv->kernels_dir) {
    m->cfg.views = &m->kernels;
    m->cfg.nviews = 1;
  }

  str_copy(m->template, sizeof m->template, template);
  m->cg_root = &srv->cg_root;
  m->made = made;
  m->arg = arg;

  if (m->ahead)
    offload_background(srv, OFFLOAD_CREATE, &m->o, making_run, making_done);
  else
    offload_owned(srv, OFFLOAD_CREATE, m->owner, &m->o, making_run, making_done);
}

void sbx_make(struct server *srv, const struct hutch_sandbox_config *cfg, const char *template,
              const char *tenant, sbx_made_fn made, void *arg) {
  make(srv, cfg, template, tenant, made, arg);
}

void sbx_make_ahead(struct server *srv, const struct hutch_sandbox_config *cfg,
                    const char *template, sbx_made_fn made, void *arg) {
  make(srv, cfg, template, NULL, made, arg);
}
