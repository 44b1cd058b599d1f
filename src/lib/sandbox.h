/* libhutch: create and destroy a sandbox (docs/architecture.md, "A sandbox's
 * life"). A created sandbox is a running hutch-agent, PID 1 of its own
 * namespaces, reachable over the returned protocol connection. */
#ifndef HUTCH_SANDBOX_H
#define HUTCH_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "err.h"

struct hutch_bind {
  char *src; /* host path */
  char *dst; /* absolute path inside the sandbox */
  bool rw;
};

/* A volume: an ext4 filesystem on a block device (a loop device of the
 * volume's image), mounted in the sandbox with its ids 0..65535 mapped onto
 * the sandbox's range. */
struct hutch_volume {
  const char *device;
  const char *dst; /* absolute path inside the sandbox */
  bool ro;
};

/* Isolation tiers (docs/isolation.md): namespaces around the host's
 * kernel, or gVisor's kernel (runsc) inside those same namespaces. */
enum hutch_isolation { HUTCH_ISOLATION_NS, HUTCH_ISOLATION_GVISOR };
const char *hutch_isolation_name(enum hutch_isolation i);
/* HUTCH_ISOLATION_* for "ns" or "gvisor"; -1 for anything else. */
int hutch_config_isolation_parse(const char *name);

struct hutch_gvisor;
struct hutch_spawner;

struct hutch_sandbox_config {
  const char *state_dir; /* templates live here */
  enum hutch_isolation isolation;
  const struct hutch_gvisor *gvisor; /* runsc as probed: the gvisor tier's */
  const char *rootfs;                /* a directory used as the template; NULL: `host` */
  const char *agent;                 /* path of hutch-agent; NULL: beside this program */
  uint64_t memory_bytes, pids, cpu_milli, disk_bytes;
  unsigned ptys; /* terminals its devpts may hold at once */
  const struct hutch_bind *binds;
  size_t nbinds;
  /* Read-only views of host directories hutch itself provides (the
   * server's code kernels): overlays of their own, which name no host path
   * in the sandbox's mountinfo as a bind would. Each source is looked up
   * again when it is mounted: only for directories nothing in a sandbox
   * can change. rw is ignored. */
  const struct hutch_bind *views;
  size_t nviews;
  /* Layers stacked above the template, topmost first: snapshots, host
   * directories written by hutch_layer_capture (layer.h). */
  const char *const *layers;
  size_t nlayers;
  const struct hutch_volume *volumes;
  size_t nvolumes;
  bool die_with_parent; /* the sandbox dies if the creating process does */
  /* A template build's RUN step (docs/templates.md): its root keeps the
   * capabilities a Dockerfile's RUN has (HUTCH_BUILD_CAPS), inside its own
   * user namespace only. Set by the builder alone; no request can ask. */
  bool build;
  /* Where the agent listens for a client that comes back (a restarted
   * server): DIR/<id>.sock, in a directory only root may enter. NULL: the
   * agent ends, and with it the sandbox, when its first connection does. */
  const char *listen_dir;
  /* The caller collects the cgroups crashed runs left (hutch_shell_gc_host, as
   * hutch serve does every few seconds): a create then does not scan every
   * slot, which with thousands of sandboxes is most of its cost. */
  bool gc_elsewhere;
  /* Clone the first process from here (spawner.h), not from the caller:
   * NULL for a caller that is small and single-threaded anyway. */
  struct hutch_spawner *spawner;
  /* The hutch root cgroup (hutch_cgroup_open_root), held open by the
   * caller: NULL to open it for each create. */
  const struct hutch_cgroup *cg_root;
};

/* Defaults and bounds shared by every front end. */
#define HUTCH_DEFAULT_MEMORY (1024ull << 20)
#define HUTCH_DEFAULT_PIDS 512
#define HUTCH_DEFAULT_DISK (1024ull << 20)
#define HUTCH_MIN_MEMORY (16ull << 20)
#define HUTCH_MIN_DISK (1ull << 20)
#define HUTCH_MAX_PIDS 65536
#define HUTCH_DEFAULT_PTYS 64
#define HUTCH_MAX_PTYS 4096

struct hutch_sandbox {
  char id[17];
  enum hutch_isolation isolation;
  unsigned slot;
  uid_t uid_base; /* host uid of the sandbox's root; the user is +1000 */
  pid_t pid;      /* host pid of the agent */
  int pidfd;
  int conn_fd; /* our end of the agent protocol connection */
  /* root: the `hutch` cgroup, open only while the sandbox is made or ended.
   * A server holds thousands of sandboxes, and every descriptor it holds is
   * copied into, and closed by, each process it clones. */
  struct hutch_cgroup root, cg;
  int lock_fd;           /* flock on the sandbox cgroup while we set it up or own it */
  int storage_fd;        /* the sandbox's storage tmpfs (O_PATH), -1 when not reached */
  char listen_path[108]; /* the agent's socket, "" when it has none */
  /* Few descriptors (hutch_shell_few_fds): cg, storage_fd and, for an
   * agent that is our child, pidfd are closed, and opened again for each
   * use from `shared` (the caller's hutch root cgroup), from the agent
   * (its storage, checked to be the one it was) and from pid. */
  const struct hutch_cgroup *shared;
  bool child; /* the agent is our child: its pid is ours until we reap it */
  dev_t storage_dev;
  ino_t storage_ino;
};

const char *hutch_config_default_state_dir(void);

/* Fill in defaults and check every limit against the host. */
int hutch_config_check(struct hutch_sandbox_config *cfg, struct hutch_err *err);

int hutch_sandbox_create(const struct hutch_sandbox_config *cfg, struct hutch_sandbox **out,
                         struct hutch_err *err);
/* Take over a sandbox made by another process that has gone (a server that
 * restarted): check that pid is still that sandbox's agent, own its cgroup
 * and connect to the agent's socket. HUTCH_ERR_NOT_FOUND when it is gone;
 * HUTCH_ERR_UNSUPPORTED for a tier that cannot be taken over (backend.h).
 * listen_dir NULL: no connection (conn_fd -1), only to destroy it: every
 * tier can be ended so (a server ending what a crashed one left). */
int hutch_sandbox_adopt(enum hutch_isolation tier, const char *id, unsigned slot, pid_t pid,
                        const char *listen_dir, struct hutch_sandbox **out, struct hutch_err *err);

/* Hold only the agent's connection, the slot's lock and (for an adopted
 * agent) its pidfd from now on: a server with thousands of sandboxes
 * under RLIMIT_NOFILE. root is the hutch root cgroup (hutch_cgroup_open_root),
 * which the caller keeps open for as long as sb lives. A storage that
 * cannot be looked at now is left unmeasured and not captured. */
void hutch_shell_few_fds(struct hutch_sandbox *sb, const struct hutch_cgroup *root);
/* A new descriptor of the sandbox's storage (O_PATH), or -1 (errno) when
 * it cannot be reached. */
int hutch_sandbox_storage(const struct hutch_sandbox *sb);

/* Kill every process of the sandbox, wait for them, remove its cgroups and
 * release its id range. Frees sb. */
int hutch_sandbox_destroy(struct hutch_sandbox *sb, struct hutch_err *err);

/* Let go of a sandbox without ending it (its agent has a listening socket
 * for whoever adopts it next). Frees sb. */
void hutch_sandbox_release(struct hutch_sandbox *sb);

/* Freeze every process of the sandbox (its agent too), returning once
 * they all are; or thaw them. */
int hutch_sandbox_freeze(struct hutch_sandbox *sb, bool frozen, struct hutch_err *err);
/* A copy of the sandbox cgroup's fds, to freeze it from another thread
 * (hutch_shell_freeze_wait) with nothing of the sandbox's in use: it may
 * be destroyed meanwhile. Close it with hutch_cgroup_close. */
int hutch_shell_cgroup(const struct hutch_sandbox *sb, struct hutch_cgroup *out,
                       struct hutch_err *err);
/* Freeze cg as hutch_sandbox_freeze does, waiting as long. */
int hutch_shell_freeze_wait(const struct hutch_cgroup *cg, struct hutch_err *err);

/* A socket (socket(2)'s domain and type; close-on-exec) made in the
 * sandbox's network namespace, for the caller to bind or connect there.
 * own_netns: an fd of the calling thread's own network namespace, where
 * it returns (opened once: /proc/thread-self/ns/net). */
int hutch_sandbox_socket(const struct hutch_sandbox *sb, int own_netns, int domain, int type,
                         struct hutch_err *err);

struct hutch_sandbox_usage {
  struct hutch_cg_usage cg;
  uint64_t disk_used, disk_total; /* bytes of its storage; 0 when unknown or not read */
};
/* disk: its storage's use too (its storage taken again from the agent: a
 * few system calls more than the cgroup's counters). */
int hutch_sandbox_usage(const struct hutch_sandbox *sb, bool disk, struct hutch_sandbox_usage *u,
                        struct hutch_err *err);

/* Remove what crashed hutch processes left behind (hutch_slot_gc, slot.h),
 * opening the cgroup root itself (a server's periodic sweep). */
void hutch_shell_gc_host(void);

#endif
