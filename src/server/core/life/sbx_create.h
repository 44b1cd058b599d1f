/* Making a sandbox for a tenant: the create every front end calls (the
 * native API, E2B's, a fork), with the request parsed into a struct
 * create_req and no HTTP in it. */
#ifndef HUTCH_CORE_LIFE_SBX_CREATE_H
#define HUTCH_CORE_LIFE_SBX_CREATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct server;
struct sbx;
struct principal;

/* A create as a front end parsed it. The JSON values are borrowed: the
 * create takes what it keeps. */
struct create_req {
  const char *template; /* "host", or one of the tenant's snapshots */
  /* HUTCH_ISOLATION_*, or -1: the snapshot's tier, else the template's
   * (its LABEL hutch.isolation), else the server's --isolation. */
  int isolation;
  double timeout_s;
  uint64_t memory_mb, pids, disk_mb; /* 0: the defaults */
  double cpus;                       /* 0: no CPU limit */
  json_t *env, *metadata;            /* objects of strings, or NULL */
  json_t *volumes;                   /* the native create's list, or NULL */
  json_t *network, *secrets;         /* docs/network.md, or NULL */
  bool pause_on_timeout;
  bool auto_resume;
  bool admitted; /* judged already (a fork's copies after its first): no admission */
};
/* template "host", the default timeout and tier, resumed by traffic. */
void sbx_create_req_init(struct create_req *r);

/* How a create ends, on the loop: made(sb, NULL, arg) with the tenant's
 * new sandbox, or made(NULL, err, arg). wanted(arg) is asked first, once
 * the sandbox is made: false (its client left) and it goes at once,
 * unseen. A warm pool's sandbox ends the create before it returns. */
struct create_ops {
  bool (*wanted)(void *arg);
  void (*made)(struct sbx *sb, const struct hutch_err *err, void *arg);
};
/* A create the tenant's quota refused (err): its quota.refused event. */
void sbx_create_refused(struct server *srv, const char *tenant, const struct hutch_err *err);
/* -1 and err at once (made is not called), else 0 and made later. */
int sbx_create(struct server *srv, const struct principal *p, const struct create_req *r,
               const struct create_ops *ops, void *arg, struct hutch_err *err);

/* Creates under way that stack layer (a snapshot's id): a snapshot they
 * use is in use as much as by a live sandbox (as a volume is: volumes.h,
 * volumes_creating). */
unsigned sbx_create_users(const struct server *srv, const char *layer);

#endif
