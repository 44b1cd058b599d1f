/* The registry of live sandboxes: creating one for a request, finding it
 * for its tenant, destroying it, and the reaper that ends those past their
 * timeout. */
#include "core/sbx.h"

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
#include "core/actions.h"
#include "core/audit.h"
#include "core/contexts.h"
#include "core/keys.h"
#include "core/layers.h"
#include "core/network.h"
#include "core/pool.h"
#include "core/procs.h"
#include "core/snapshots.h"
#include "core/tally.h"
#include "core/usage.h"
#include "state/store.h"

int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The registry: a list (for walks) and a table by id (for lookups), so
 * that finding, adding and removing a sandbox cost the same with 5 or 5000. */
static unsigned id_bucket(const char *id, unsigned n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *id; id++)
    h = (h ^ (uint8_t)*id) * 16777619u;
  return h & (n - 1);
}

static void by_id_grow(struct server *srv) {
  unsigned n = srv->nby_id ? srv->nby_id * 2 : 256;
  struct sbx **t = xcalloc(n, sizeof *t);
  for (unsigned i = 0; i < srv->nby_id; i++)
    for (struct sbx *sb = srv->by_id[i], *next; sb; sb = next) {
      next = sb->id_next;
      unsigned b = id_bucket(sb->id, n);
      sb->id_next = t[b];
      t[b] = sb;
    }
  free(srv->by_id);
  srv->by_id = t;
  srv->nby_id = n;
}

void sbx_register(struct server *srv, struct sbx *sb) {
  if (srv->nsandboxes >= srv->nby_id)
    by_id_grow(srv);
  sb->prev = NULL;
  sb->next = srv->sandboxes;
  if (sb->next)
    sb->next->prev = sb;
  srv->sandboxes = sb;
  unsigned b = id_bucket(sb->id, srv->nby_id);
  sb->id_next = srv->by_id[b];
  srv->by_id[b] = sb;
  sb->listed = true;
  srv->nsandboxes++;
  tally_listed(srv, sb, true);
}

/* Whether it was listed (a sandbox made for a client that left before it
 * was its own never is). */
static bool unregister(struct server *srv, struct sbx *sb) {
  if (!sb->listed)
    return false;
  sb->listed = false;
  tally_listed(srv, sb, false);
  if (sb->prev)
    sb->prev->next = sb->next;
  else
    srv->sandboxes = sb->next;
  if (sb->next)
    sb->next->prev = sb->prev;
  for (struct sbx **p = &srv->by_id[id_bucket(sb->id, srv->nby_id)]; *p; p = &(*p)->id_next)
    if (*p == sb) {
      *p = sb->id_next;
      break;
    }
  srv->nsandboxes--;
  return true;
}

/* Another tenant's sandbox is not found, exactly as one that never was:
 * ids must not be a way to learn about other tenants. */
struct sbx *sbx_find_own(struct server *srv, const struct principal *p, const char *id) {
  struct sbx *sb = sbx_find(srv, id);
  return sb && strcmp(sb->tenant, p->tenant) == 0 ? sb : NULL;
}

struct sbx *sbx_find(struct server *srv, const char *id) {
  if (!srv->nby_id || !id)
    return NULL;
  for (struct sbx *sb = srv->by_id[id_bucket(id, srv->nby_id)]; sb; sb = sb->id_next)
    if (!sb->dying && strcmp(sb->id, id) == 0)
      return sb;
  return NULL;
}

void iso8601(int64_t ms, char out[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

json_t *sbx_json(const struct sbx *sb) {
  char created[32], expires[32];
  iso8601(sb->created_ms, created);
  iso8601(sb->expires_ms, expires);
  /* cpus is null when the sandbox may use every CPU. */
  json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:o,s:I,s:I,s:O,s:s,s:b}", "id", sb->id,
                        "state", sb->paused ? "paused" : "running", "template", sb->template,
                        "created_at", created, "expires_at", expires, "memory_mb",
                        (json_int_t)sb->memory_mb, "cpus",
                        sb->cpu_milli ? json_real((double)sb->cpu_milli / 1000) : json_null(),
                        "pids", (json_int_t)sb->pids, "disk_mb", (json_int_t)sb->disk_mb,
                        "metadata", sb->metadata, "on_timeout",
                        sb->pause_on_timeout ? "pause" : "kill", "auto_resume", sb->auto_resume);
  json_object_set_new(j, "isolation", json_string(hutch_isolation_name(sb->hs->isolation)));
  json_object_set_new(j, "volumes", sb->volumes ? json_deep_copy(sb->volumes) : json_array());
  json_object_set_new(j, "network", json_deep_copy(sb->network));
  json_object_set_new(j, "traffic_token", json_string(sb->traffic_token));
  json_object_set_new(j, "domain", json_string(sb->srv->cfg.domain));
  escapes_json(sb, j);
  /* While paused the timeout's clock stands: no expiry, but what is left
   * of it and when the paused sandbox itself goes. */
  if (sb->paused) {
    char paused[32], deleted[32];
    iso8601(sb->paused_ms, paused);
    iso8601(sb->paused_ms + sb->srv->cfg.paused_retention_ms, deleted);
    json_object_set_new(j, "expires_at", json_null());
    json_object_set_new(j, "paused_at", json_string(paused));
    json_object_set_new(j, "deleted_at", json_string(deleted));
    json_object_set_new(j, "timeout_left_s", json_real((double)sb->left_ms / 1000));
  }
  return j;
}

/* What the store keeps of it beyond its columns: what the next server
 * needs to take it over (sbx_adopt_all). */
static json_t *sbx_spec(const struct sbx *sb) {
  json_t *spec = json_pack(
      "{s:O,s:O,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:b,s:b,s:b,s:I,s:I,s:s}", "metadata", sb->metadata,
      "env", sb->env, "memory_mb", (json_int_t)sb->memory_mb, "pids", (json_int_t)sb->pids,
      "cpu_milli", (json_int_t)sb->cpu_milli, "disk_mb", (json_int_t)sb->disk_mb, "slot",
      (json_int_t)sb->hs->slot, "token", sb->token, "timeout_ms", (json_int_t)sb->timeout_ms,
      "auto_resume", sb->auto_resume, "pause_on_timeout", sb->pause_on_timeout, "paused",
      sb->paused, "paused_ms", (json_int_t)sb->paused_ms, "left_ms", (json_int_t)sb->left_ms,
      "traffic_token", sb->traffic_token);
  if (spec && sb->layers)
    json_object_set(spec, "layers", sb->layers);
  if (spec && sb->user)
    json_object_set_new(spec, "user", json_string(sb->user));
  if (spec && sb->workdir)
    json_object_set_new(spec, "workdir", json_string(sb->workdir));
  if (spec && sb->volumes)
    json_object_set(spec, "volumes", sb->volumes);
  if (spec && sb->network)
    json_object_set(spec, "network", sb->network);
  if (spec && sb->secrets)
    json_object_set(spec, "secrets", sb->secrets);
  return spec;
}

int sbx_store(struct sbx *sb, bool first, struct hutch_err *err) {
  json_t *spec = sbx_spec(sb);
  if (!spec)
    return hutch_err_set(err, 0, "state store: encoding sandbox %s", sb->id);
  struct store_row row = {.id = sb->id, .tenant = sb->tenant, .template = sb->template,
                          .created_ms = sb->created_ms, .expires_ms = sb->expires_ms,
                          .pid = sb->hs->pid, .spec = spec,
                          .isolation = hutch_isolation_name(sb->hs->isolation)};
  int r = first ? store_sandbox_put(sb->srv->store, &row, err)
                : store_sandbox_respec(sb->srv->store, &row, err);
  json_decref(spec);
  return r;
}

static void sbx_free_now(struct sbx *sb) {
  procs_free(sb);
  contexts_free(sb);
  if (sb->srv->fronts)
    sb->srv->fronts->sandbox_freed(sb);
  usage_free(sb);
  escapes_free(sb);
  json_decref(sb->layers);
  free(sb->user);
  free(sb->workdir);
  if (sb->pin >= 0) /* a sandbox never made (sbx_destroy hands it to its teardown) */
    close(sb->pin);
  json_decref(sb->volumes);
  json_decref(sb->metadata);
  json_decref(sb->env);
  json_decref(sb->log);
  json_decref(sb->artifacts_seen);
  network_free(sb);
  free(sb);
}

static void sbx_free(struct agentc *ac) {
  sbx_free_now((struct sbx *)((char *)ac - offsetof(struct sbx, ac)));
}

/* The agent connection failed: the sandbox is of no more use. */
void sbx_agent_dead(struct agentc *ac) {
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  fprintf(stderr, "hutch serve: sandbox %s: agent connection lost; destroying it\n", sb->id);
  sbx_destroy(sb);
}

/* A sandbox without its proxy still runs, with no way out: said, not fatal. */
static void open_egress(struct sbx *sb) {
  struct hutch_err err = {0};
  if (egress_open(sb, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: no egress proxy: %s\n", sb->id, err.msg);
}

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
 *    belong to the open file, so the collector (hutch_gc, on this thread
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

/* A sandbox made ahead of demand yields the CPUs to requests: its thread,
 * and what it clones, run SBX_AHEAD_NICE steps below the process (nice is
 * per thread on Linux); the sandbox's first process returns to the
 * process's own before the agent starts (spawn.c), so a sandbox taken from
 * a pool runs as one made for the request. The thread gets its priority
 * back before it takes other work. */
/* Whether a thread may raise its priority again (CAP_SYS_NICE): without
 * it, a refill is made at the server's own, rather than leave the thread,
 * or the agent, below it. */
static bool may_renice(void) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  return syscall(SYS_capget, &h, d) == 0 && (d[CAP_SYS_NICE / 32].effective >> (CAP_SYS_NICE % 32)) & 1;
}

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
    hutch_sandbox_few_fds(m->hs, m->cg_root);
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
  serve_random_hex(sb->token, SERVE_TOKEN_LEN);
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
  serve_random_hex(sb->traffic_token, SERVE_TOKEN_LEN);
  struct hutch_err ignored;
  network_restore(sb, NULL, NULL, &ignored); /* mode none, no secrets: cannot fail */
  open_egress(sb);
  return sb;
}

static void making_done(struct offload *o) {
  struct making *m = OFFLOAD_JOB(o, struct making);
  struct server *srv = o->srv;
  struct sbx *sb = NULL;
  /* What a create takes on its lane, for admission (sandboxes.c): a
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
  m->cfg.gc_elsewhere = true; /* the reaper's hutch_gc_host */
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

/* A sandbox's end off the loop: killing its agent waits for every process
 * of it to die, and removing its cgroups for the kernel to let them go. */
struct teardown {
  struct offload o;
  struct teardown *next; /* srv->teardowns: its layers are in use until it is done */
  void (*gone)(void *arg); /* told once it is gone, or NULL */
  void *arg;
  struct hutch_sandbox *hs;
  json_t *layers; /* a fork's snapshot is released once its files are unused */
  int pin;        /* its template's, closed once its files are unused */
  char id[17];
  struct hutch_err err;
  int r;
};

static void teardown_run(struct offload *o) {
  struct teardown *t = OFFLOAD_JOB(o, struct teardown);
  t->r = hutch_sandbox_destroy(t->hs, &t->err);
}

static void teardown_done(struct offload *o) {
  struct teardown *t = OFFLOAD_JOB(o, struct teardown);
  if (t->r < 0)
    fprintf(stderr, "hutch serve: sandbox %s: teardown: %s\n", t->id, t->err.msg);
  for (struct teardown **q = &o->srv->teardowns; *q; q = &(*q)->next)
    if (*q == t) {
      *q = t->next;
      break;
    }
  if (t->gone)
    t->gone(t->arg);
  if (t->layers)
    snapshots_release(o->srv, t->layers);
  json_decref(t->layers);
  if (t->pin >= 0)
    close(t->pin);
  free(t);
}

static void teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers, int pin,
                     void (*gone)(void *arg), void *arg) {
  struct teardown *t = xcalloc(1, sizeof *t);
  t->pin = pin;
  t->hs = hs;
  t->gone = gone;
  t->arg = arg;
  t->layers = json_incref(layers);
  t->next = srv->teardowns;
  srv->teardowns = t;
  memcpy(t->id, hs->id, sizeof t->id);
  offload(srv, OFFLOAD_OTHER, &t->o, teardown_run, teardown_done);
}

unsigned sbx_teardown_users(const struct server *srv, const char *layer) {
  unsigned n = 0;
  for (const struct teardown *t = srv->teardowns; t; t = t->next) {
    size_t i;
    json_t *v;
    json_array_foreach(t->layers, i, v) n += strcmp(json_string_value(v), layer) == 0;
  }
  return n;
}

void sbx_teardown(struct server *srv, struct hutch_sandbox *hs, json_t *layers) {
  teardown(srv, hs, layers, -1, NULL, NULL);
}

void sbx_set_defaults(struct sbx *sb, const char *user, const char *workdir) {
  free(sb->user);
  free(sb->workdir);
  sb->user = user ? xstrdup(user) : NULL;
  sb->workdir = workdir ? xstrdup(workdir) : NULL;
}

void sbx_destroy(struct sbx *sb) { sbx_destroy_then(sb, NULL, NULL); }

void sbx_destroy_then(struct sbx *sb, void (*gone)(void *arg), void *arg) {
  struct server *srv = sb->srv;
  if (sb->dying)
    return;
  sb->dying = true;
  sbx_freeze_forget(sb);
  struct hutch_err err = {0};
  if (sb->pool) {
    pool_unlink(sb);
  } else {
    if (unregister(srv, sb)) {
      srv->metrics.destroys++;
      usage_sample(sb); /* its last use counted */
      if (store_sandbox_delete(srv->store, sb->id, &err) < 0)
        fprintf(stderr, "hutch serve: %s\n", err.msg);
    }
  }
  escapes_final(sb);
  egress_close(sb);
  if (srv->fronts)
    srv->fronts->sandbox_ending(sb);
  /* Streams hear the end first (their clients get a last line), then the
   * sandbox goes. The fd belongs to the connection, if there is one yet. */
  bool connected = !sb->agent_pending;
  if (connected) {
    sb->hs->conn_fd = -1;
    agentc_close(&sb->ac, sbx_free);
  }
  teardown(srv, sb->hs, sb->pool ? NULL : sb->layers, steal_fd(&sb->pin), gone, arg);
  sb->hs = NULL;
  if (!connected)
    sbx_free_now(sb);
}

void sbx_destroy_all(struct server *srv) {
  while (srv->sandboxes)
    sbx_destroy(srv->sandboxes);
}

/* Let go of every sandbox without ending it: its agent, losing us, waits
 * for the next server (sbx_adopt_all). */
void sbx_release_all(struct server *srv) {
  while (srv->sandboxes) {
    struct sbx *sb = srv->sandboxes;
    /* A tier a next server cannot take over (gvisor: its agent has no
     * socket on the host) ends now rather than with its connection, its
     * row and cgroups with it. */
    if (!(hutch_backend_of(sb->hs->isolation)->can & HUTCH_CAN_ADOPT)) {
      fprintf(stderr, "hutch serve: sandbox %s (%s) ends: a next start cannot take it over\n",
              sb->id, hutch_isolation_name(sb->hs->isolation));
      sbx_destroy(sb);
      continue;
    }
    unregister(srv, sb);
    sb->dying = true;
    sbx_freeze_forget(sb);
    usage_sample(sb); /* its last use counted */
    escapes_final(sb); /* the next server starts from the agent's counts */
    egress_close(sb);
    if (srv->fronts)
      srv->fronts->sandbox_ending(sb);
    /* Frozen only for a snapshot's copy, which will not finish: it runs on. */
    struct hutch_err err = {0};
    if (sb->captures && !sb->paused && hutch_sandbox_freeze(sb->hs, false, &err) < 0)
      fprintf(stderr, "hutch serve: sandbox %s: thaw: %s\n", sb->id, err.msg);
    /* Its pin goes with this process: until the next start pins them
     * again, its template's layers are held in the store. */
    _cleanup_free_ char *holder = xasprintf("sbx-%s", sb->id);
    if (!sb->pool)
      layers_hold(srv, sb->layers, holder, true);
    bool connected = !sb->agent_pending;
    if (connected)
      sb->hs->conn_fd = -1; /* the connection's to close */
    hutch_sandbox_release(sb->hs);
    sb->hs = NULL;
    if (connected)
      agentc_close(&sb->ac, sbx_free);
    else
      sbx_free_now(sb);
  }
}

static void audit_reaped(struct server *srv, const struct sbx *sb, const char *action) {
  serve_audit(srv, json_pack("{s:s,s:s,s:s,s:i,s:n,s:i}", "tenant", sb->tenant, "action", action,
                             "sandbox", sb->id, "status", 200, "error", "duration_ms", 0));
}

static void collect_run(struct offload *o) {
  (void)o;
  hutch_gc_host();
}

static void collect_done(struct offload *o) {
  o->srv->collecting = false;
  free(o);
}

/* The end of a pause the timeout asked for: one that cannot be frozen
 * ends instead. */
static void paused_at_timeout(struct sbx *sb, int r, struct hutch_err *err, void *arg) {
  (void)arg;
  if (!sb)
    return; /* destroyed meanwhile */
  if (r == 0) {
    audit_reaped(sb->srv, sb, "sandbox.pause");
    return;
  }
  fprintf(stderr, "hutch serve: sandbox %s: pausing at its timeout: %s; ending it\n", sb->id,
          err->msg);
  sb->srv->metrics.expired++;
  audit_reaped(sb->srv, sb, "sandbox.expire");
  sbx_destroy(sb);
}

/* A running sandbox past its timeout ends, or is paused if it asked to be
 * (then it has no timeout left); a paused one ends after the retention. */
static void reap(uv_timer_t *t) {
  struct server *srv = t->data;
  int64_t now = wall_ms();
  /* Every few seconds, what killed servers and hutch runs left behind:
   * off the loop, as it opens every slot's cgroup. */
  if (++srv->reaper_ticks % 30 == 1 && !srv->collecting) {
    srv->collecting = true;
    offload(srv, OFFLOAD_OTHER, xcalloc(1, sizeof(struct offload)), collect_run, collect_done);
  }
  /* Every second, relayed connections idle too long (egress, ports). */
  if (srv->reaper_ticks % 10 == 0)
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
      egress_sweep(sb, srv->cfg.relay_idle_ms);
      if (srv->fronts)
        srv->fronts->sandbox_sweep(sb, srv->cfg.relay_idle_ms);
    }
  struct sbx *next;
  for (struct sbx *sb = srv->sandboxes; sb; sb = next) {
    next = sb->next;
    if (sb->freezing)
      continue; /* a pause or a snapshot under way: its end decides */
    if (sb->paused) {
      if (sb->paused_ms + srv->cfg.paused_retention_ms <= now) {
        srv->metrics.expired++;
        audit_reaped(srv, sb, "sandbox.expire");
        sbx_destroy(sb);
      }
    } else if (sb->expires_ms <= now) {
      if (sb->pause_on_timeout) {
        sbx_pause(sb, paused_at_timeout, NULL);
        continue;
      }
      srv->metrics.expired++;
      audit_reaped(srv, sb, "sandbox.expire");
      sbx_destroy(sb);
    }
  }
  escapes_audit_due(srv, now);
  usage_sample_all(srv);
  if (srv->reaper_ticks % 10 == 5)
    pool_shrink(srv);
  /* Every 5 s, if sandboxes ended since: what their ends freed, on the
   * loop and in the arenas of libuv's pool threads (which made them), goes
   * back to the system; glibc keeps freed heap otherwise, and SQLite its
   * page cache. */
  if (srv->reaper_ticks % 50 == 0) {
    if (srv->nsandboxes < srv->trim_mark) {
      store_release_memory(srv->store);
      malloc_trim(0);
    }
    srv->trim_mark = srv->nsandboxes;
  }
}

/* Every 100 ms (the first at once): a sandbox outlives its timeout by at most that, plus its
 * teardown. */
void sbx_reaper_start(struct server *srv) {
  uv_timer_init(srv->loop, &srv->reaper);
  srv->reaper.data = srv;
  uv_timer_start(&srv->reaper, reap, 0, 100);
}

/* ---- taking sandboxes over after a restart ---- */

struct adopt_ctx {
  struct server *srv;
  int64_t now;
  unsigned adopted, ended;
};

static void adopt_jobs(struct agentc *ac, json_t *jobs, void *arg) {
  (void)arg;
  struct sbx *sb = (struct sbx *)((char *)ac - offsetof(struct sbx, ac));
  procs_adopt(sb, jobs);
  ac->on_escapes = escapes_update; /* the HELLO's counts come next */
}

int sbx_connect_agent(struct sbx *sb) {
  sb->agent_pending = false;
  if (agentc_adopt(&sb->ac, sb->srv->loop, sb->hs->conn_fd, 2000, adopt_jobs, NULL) < 0) {
    /* A connection whose poll handle was never made is not one to close:
     * the sandbox's destroy then leaves the fd to its teardown. */
    if (!sb->ac.poll.data)
      sb->agent_pending = true;
    return -1;
  }
  sb->ac.on_dead = sbx_agent_dead;
  return 0;
}

static int64_t spec_int(json_t *spec, const char *key, int64_t dflt) {
  json_t *v = json_object_get(spec, key);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* A sandbox of a tier that cannot be taken over (gvisor: its agent had no
 * socket to come back to, and ended with the last server's connection):
 * what may be left of it is killed, its row and holds go. */
static void lost_tier(struct server *srv, const struct store_sandbox *row, int tier,
                      const char *holder, json_t *held) {
  struct hutch_err err = {0};
  json_t *slot = json_object_get(row->spec, "slot");
  struct hutch_sandbox *hs;
  if (json_is_integer(slot) && tier >= 0 &&
      hutch_sandbox_adopt((enum hutch_isolation)tier, row->id, (unsigned)json_integer_value(slot),
                          (pid_t)row->pid, NULL, &hs, &err) == 0 &&
      hutch_sandbox_destroy(hs, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: %s\n", row->id, err.msg);
  fprintf(stderr, "hutch serve: sandbox %s (%s) was lost with the last server: ended\n", row->id,
          row->isolation);
  layers_hold(srv, held, holder, false);
  store_sandbox_delete(srv->store, row->id, &err);
}

/* One row of the store: take it over, or end it if it expired meanwhile,
 * or forget it if its agent is gone (its cgroups are collected later). */
static void adopt_one(const struct store_sandbox *row, void *arg) {
  struct adopt_ctx *ctx = arg;
  struct server *srv = ctx->srv;
  struct hutch_err err = {0};
  json_t *slot = json_object_get(row->spec, "slot");
  struct sbx *sb = xcalloc(1, sizeof *sb);
  sb->pin = -1;
  /* What the stopping server held for it (sbx_release_all) goes once it
   * is pinned again, or at once when it is not taken over. */
  _cleanup_free_ char *holder = xasprintf("sbx-%s", row->id);
  json_t *held = json_object_get(row->spec, "layers");
  int tier = row->isolation ? hutch_isolation_parse(row->isolation) : HUTCH_ISOLATION_NS;
  if (tier < 0 || !(hutch_backend_of((enum hutch_isolation)tier)->can & HUTCH_CAN_ADOPT)) {
    lost_tier(srv, row, tier, holder, held);
    free(sb);
    ctx->ended++;
    return;
  }
  if (!json_is_integer(slot) ||
      hutch_sandbox_adopt((enum hutch_isolation)tier, row->id, (unsigned)json_integer_value(slot),
                          (pid_t)row->pid, srv->agents_dir, &sb->hs, &err) < 0) {
    fprintf(stderr, "hutch serve: sandbox %s: not taken over: %s\n", row->id,
            json_is_integer(slot) ? err.msg : "no slot recorded");
    layers_hold(srv, held, holder, false);
    free(sb);
    store_sandbox_delete(srv->store, row->id, &err);
    ctx->ended++;
    return;
  }
  hutch_sandbox_few_fds(sb->hs, &srv->cg_root);
  sb->srv = srv;
  memcpy(sb->id, row->id, sizeof sb->id);
  str_copy(sb->tenant, sizeof sb->tenant, row->tenant);
  str_copy(sb->template, sizeof sb->template, row->template);
  json_t *md = json_object_get(row->spec, "metadata"), *env = json_object_get(row->spec, "env");
  sb->metadata = json_is_object(md) ? json_deep_copy(md) : json_object();
  sb->env = json_is_object(env) ? json_deep_copy(env) : json_object();
  sb->memory_mb = (uint64_t)json_integer_value(json_object_get(row->spec, "memory_mb"));
  sb->pids = (uint64_t)json_integer_value(json_object_get(row->spec, "pids"));
  sb->cpu_milli = (uint64_t)json_integer_value(json_object_get(row->spec, "cpu_milli"));
  sb->disk_mb = (uint64_t)json_integer_value(json_object_get(row->spec, "disk_mb"));
  const char *token = json_string_value(json_object_get(row->spec, "token"));
  if (token && strlen(token) == SERVE_TOKEN_LEN)
    memcpy(sb->token, token, sizeof sb->token);
  else /* stored by a server that gave none */
    serve_random_hex(sb->token, SERVE_TOKEN_LEN);
  sb->created_ms = row->created_ms;
  sb->expires_ms = row->expires_ms;
  sb->timeout_ms = spec_int(row->spec, "timeout_ms", row->expires_ms - row->created_ms);
  sb->auto_resume = json_is_true(json_object_get(row->spec, "auto_resume"));
  sb->pause_on_timeout = json_is_true(json_object_get(row->spec, "pause_on_timeout"));
  sb->paused = json_is_true(json_object_get(row->spec, "paused"));
  sb->paused_ms = spec_int(row->spec, "paused_ms", 0);
  sb->left_ms = spec_int(row->spec, "left_ms", 0);
  json_t *layers = json_object_get(row->spec, "layers");
  sb->layers = json_is_array(layers) ? json_incref(layers) : NULL;
  sbx_set_defaults(sb, json_string_value(json_object_get(row->spec, "user")),
                   json_string_value(json_object_get(row->spec, "workdir")));
  /* Its template's layers are its own again: pinned for its life. */
  const char *tmpl = layers_template(sb->layers);
  json_t *rec = tmpl ? hutch_images_get(&srv->images, tmpl, &err) : NULL;
  if (rec && (sb->pin = hutch_images_pin(&srv->images, rec, &err)) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: template %s: %s\n", sb->id, tmpl, err.msg);
  json_decref(rec);
  layers_hold(srv, held, holder, false);
  json_t *volumes = json_object_get(row->spec, "volumes");
  sb->volumes = json_is_array(volumes) ? json_incref(volumes) : NULL;
  const char *traffic = json_string_value(json_object_get(row->spec, "traffic_token"));
  if (traffic && strlen(traffic) == SERVE_TOKEN_LEN)
    memcpy(sb->traffic_token, traffic, sizeof sb->traffic_token);
  else
    serve_random_hex(sb->traffic_token, SERVE_TOKEN_LEN);
  if (network_restore(sb, json_object_get(row->spec, "network"),
                      json_object_get(row->spec, "secrets"), &err) < 0) {
    /* Never more open than it was: no way out at all. */
    fprintf(stderr, "hutch serve: sandbox %s: %s; its network mode is now none\n", sb->id,
            err.msg);
    network_restore(sb, NULL, NULL, &err);
  }
  sbx_register(srv, sb);
  open_egress(sb);
  /* A paused agent cannot answer: it is taken over when it is resumed,
   * and its retention is the reaper's to watch. */
  if (sb->paused) {
    sb->agent_pending = true;
    ctx->adopted++;
    return;
  }
  /* Running, as the store says: a server that died while copying a
   * snapshot of it left it frozen. */
  if (hutch_sandbox_freeze(sb->hs, false, &err) < 0)
    fprintf(stderr, "hutch serve: sandbox %s: thaw: %s\n", sb->id, err.msg);
  if (sbx_connect_agent(sb) < 0) {
    fprintf(stderr, "hutch serve: sandbox %s: its agent did not answer; destroying it\n", sb->id);
    sbx_destroy(sb);
    ctx->ended++;
    return;
  }
  if (sb->expires_ms <= ctx->now) { /* expired while no server watched */
    sbx_destroy(sb);
    ctx->ended++;
    return;
  }
  ctx->adopted++;
}

int sbx_adopt_all(struct server *srv, struct hutch_err *err) {
  struct adopt_ctx ctx = {srv, wall_ms(), 0, 0};
  if (store_sandbox_each(srv->store, adopt_one, &ctx, err) < 0)
    return -1;
  if (ctx.adopted || ctx.ended)
    fprintf(stderr, "hutch serve: took over %u sandboxes; %u had ended or expired\n",
            ctx.adopted, ctx.ended);
  return 0;
}
