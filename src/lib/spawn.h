/* Starting a sandbox's first process: clone into new namespaces, build the
 * root filesystem, enter the sandbox's user namespace, exec the agent. */
#ifndef HUTCH_SPAWN_H
#define HUTCH_SPAWN_H

#include "err.h"
#include "rootfs.h"
#include "sandbox.h"

struct hutch_spawn {
  struct hutch_rootfs rootfs;
  const struct hutch_cgroup *cg;       /* the sandbox cgroup, handed to the agent */
  const struct hutch_cgroup *agent_cg; /* where the agent runs */
  int conn_fd;                         /* the agent's end of the connection */
  int listen_fd;                       /* its listening socket, -1 for none */
  bool build;                          /* a build step's: the agent's --build */
  int nice; /* the agent's: the process's (hutch_spawn_start), whatever the creating thread's */
  /* out */
  pid_t pid;
  int pidfd;
  int sync_fd; /* ours, between start and finish */
};

/* Clone the sandbox's first process, which starts building the sandbox at
 * once. The caller may work meanwhile (on another CPU), then must call
 * hutch_spawn_finish (or hutch_spawn_abort) to hand it its network
 * namespace, map its user namespace and let it exec the agent. */
int hutch_spawn_start(struct hutch_spawn *s, struct hutch_err *err);
int hutch_spawn_finish(struct hutch_spawn *s, int netns_fd, struct hutch_err *err);
void hutch_spawn_abort(struct hutch_spawn *s);
/* The clone itself, with flags beyond the namespaces (spawner.c adds
 * CLONE_PARENT): the child runs the first process's steps with sync as its
 * end of the sync socket, and never returns. */
pid_t hutch_spawn_clone(struct hutch_spawn *s, int sync, uint64_t flags, int *pidfd);

/* A user namespace mapping count host uids/gids from from_uid/from_gid to
 * to (both), for id-mapped mounts. */
int hutch_spawn_idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to, unsigned count,
                             struct hutch_err *err);

#endif
