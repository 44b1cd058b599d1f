/* What sandboxes use, over time: every sandbox is sampled every
 * SAMPLE_EVERY_MS, less often past 1000 sandboxes (CPU time, memory, disk,
 * processes from its cgroup and its storage), the last SAMPLES_KEPT
 * samples are its metrics, and what it used while running is charged to
 * its tenant (CPU-seconds, memory GB-seconds and sandbox-seconds, in the
 * store). Paused time is not charged. Its routes are api/usage.c's and
 * e2b/control.c's. */
#include "core/tenancy/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"
#include "state/store.h"

#define SAMPLE_EVERY_MS 2000
#define SAMPLES_PER_S 500 /* at most, over all sandboxes */
#define SAMPLES_KEPT 300  /* ten minutes */
#define SAMPLES_FIRST 8   /* the ring's first size: it grows with the sandbox's age */
/* Its storage's use is read every DISK_EVERY samples (it moves slower than
 * CPU and memory, and its reading costs as much as theirs); a sample in
 * between keeps the last. */
#define DISK_EVERY 2

struct values {
  double cpu_pct;
  uint64_t cpu_ns, memory, cache, disk, disk_total, pids;
};

struct sample {
  int64_t ms;
  struct values v;
};

/* Samples in a row that read the same (an idle sandbox's: all but the
 * time), kept once. */
struct run {
  struct values v;
  unsigned n;
};

/* A ring: cap slots of size bytes, n of them held, the next written at
 * head. It grows by doubling, to SAMPLES_KEPT, as it fills. */
struct ring {
  void *slot;
  unsigned cap, head, n;
};

/* The samples, oldest first: their times, and what they read as runs
 * (the runs' n add up to the times' n). A young or an idle sandbox holds
 * little. */
struct samples {
  struct ring ms;   /* int64_t */
  struct ring runs; /* struct run */
  unsigned taken;   /* samples taken: the disk is read on every DISK_EVERY-th */
};

static void *ring_at(const struct ring *r, size_t size, unsigned i) { /* i: 0 the oldest */
  return (char *)r->slot + (size_t)((r->head + r->cap - r->n + i) % r->cap) * size;
}

/* Room for one more at the newest end: the ring grows, or its oldest must
 * go first (the caller's). */
static void *ring_push(struct ring *r, size_t size) {
  if (r->n == r->cap && r->cap < SAMPLES_KEPT) {
    unsigned cap = SAMPLES_FIRST;
    if (r->cap)
      cap = r->cap * 2 < SAMPLES_KEPT ? r->cap * 2 : SAMPLES_KEPT;
    char *to = xcalloc(cap, size);
    for (unsigned i = 0; i < r->n; i++)
      memcpy(to + (size_t)i * size, ring_at(r, size, i), size);
    free(r->slot);
    *r = (struct ring){.slot = to, .cap = cap, .head = r->n, .n = r->n};
  }

  void *at = (char *)r->slot + (size_t)r->head * size;
  r->head = (r->head + 1) % r->cap;
  r->n++;
  return at;
}

static bool same(const struct values *a, const struct values *b) {
  return a->cpu_pct == b->cpu_pct && a->cpu_ns == b->cpu_ns && a->memory == b->memory &&
         a->cache == b->cache && a->disk == b->disk && a->disk_total == b->disk_total &&
         a->pids == b->pids;
}

/* Keep x as the newest sample, the oldest going once SAMPLES_KEPT are. */
static void keep(struct samples *s, const struct sample *x) {
  if (s->ms.n == SAMPLES_KEPT) {
    s->ms.n--;
    struct run *oldest = ring_at(&s->runs, sizeof *oldest, 0);
    if (--oldest->n == 0)
      s->runs.n--;
  }

  *(int64_t *)ring_push(&s->ms, sizeof(int64_t)) = x->ms;

  struct run *newest = s->runs.n ? ring_at(&s->runs, sizeof *newest, s->runs.n - 1) : NULL;
  if (newest && same(&newest->v, &x->v))
    newest->n++;
  else
    *(struct run *)ring_push(&s->runs, sizeof(struct run)) = (struct run){.v = x->v, .n = 1};
}

/* The CPUs a sandbox may use: its limit, or the host's. */
static double cpus_of(const struct sbx *sb) {
  if (sb->cpu_milli)
    return (double)sb->cpu_milli / 1000;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return (double)(n > 0 ? n : 1);
}

/* The newest sample into out: out, or NULL when there is none. */
static const struct sample *last_of(const struct samples *s, struct sample *out) {
  if (!s || !s->ms.n)
    return NULL;
  out->ms = *(int64_t *)ring_at(&s->ms, sizeof(int64_t), s->ms.n - 1);
  out->v = ((struct run *)ring_at(&s->runs, sizeof(struct run), s->runs.n - 1))->v;
  return out;
}

/* A reading now, its CPU share measured since prev; its disk's use read
 * only when disk (or there is no prev), else prev's. */
static int read_now(const struct sbx *sb, const struct sample *prev, bool disk,
                    struct sample *out) {
  struct hutch_sandbox_usage u;
  struct hutch_err err = {0};
  disk = disk || !prev;
  if (!sb->hs || hutch_sandbox_usage(sb->hs, disk, &u, &err) < 0)
    return -1;

  *out = (struct sample){.ms = wall_ms(),
                         .v = {.cpu_ns = u.cg.cpu_ns,
                               .memory = u.cg.memory_bytes,
                               .cache = u.cg.memory_cache,
                               .disk = u.disk_used,
                               .disk_total = u.disk_total,
                               .pids = u.cg.pids}};
  if (!disk) {
    out->v.disk = prev->v.disk;
    out->v.disk_total = prev->v.disk_total;
  }

  if (prev && out->ms > prev->ms && out->v.cpu_ns >= prev->v.cpu_ns)
    out->v.cpu_pct = (double)(out->v.cpu_ns - prev->v.cpu_ns) /
                     ((double)(out->ms - prev->ms) * 1e6) / cpus_of(sb) * 100;
  return 0;
}

/* Charged to its tenant in the store at once: usage_of reads the store
 * alone. */
static void charge(struct sbx *sb, const struct usage_delta *d) {
  struct hutch_err err = {0};
  if ((d->cpu_s || d->sandbox_s) && store_usage_add(sb->srv->store, sb->tenant, d, &err) < 0)
    fprintf(stderr, "hutch serve: %s\n", err.msg);
}

void usage_sample(struct sbx *sb) {
  if (!sb->samples)
    sb->samples = xcalloc(1, sizeof *sb->samples);
  struct samples *s = sb->samples;
  struct sample last, now;
  const struct sample *prev = last_of(s, &last);
  if (read_now(sb, prev, s->taken++ % DISK_EVERY == 0, &now) < 0)
    return;

  /* The time since the last sample is charged, if it ran all of it. */
  if (prev && !sb->paused && now.ms > prev->ms) {
    double dt = (double)(now.ms - prev->ms) / 1000;
    struct usage_delta d = {.cpu_s = (double)(now.v.cpu_ns - prev->v.cpu_ns) / 1e9,
                            .memory_gb_s = (double)now.v.memory / (1 << 30) * dt,
                            .sandbox_s = dt};
    charge(sb, &d);
  }

  keep(s, &now);
}

/* Each sandbox every SAMPLE_EVERY_MS, or less often when there are more
 * than SAMPLES_PER_S x that many seconds of them: a reading opens the
 * sandbox's cgroup and reads four files, every DISK_EVERY-th takes its
 * storage again too (some 20 system calls, a row written), on the loop,
 * which thousands of idle sandboxes must not take from the requests. */
void usage_sample_all(struct server *srv) {
  int64_t now = wall_ms();
  int64_t every = SAMPLE_EVERY_MS;
  if ((int64_t)srv->nsandboxes * 1000 / SAMPLES_PER_S > every)
    every = (int64_t)srv->nsandboxes * 1000 / SAMPLES_PER_S;

  for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
    struct sample x;
    const struct sample *last = last_of(sb->samples, &x);
    if (!last || now - last->ms >= every - 50)
      usage_sample(sb);
  }
}

void usage_free(struct sbx *sb) {
  if (sb->samples) {
    free(sb->samples->ms.slot);
    free(sb->samples->runs.slot);
  }
  free(sb->samples);
  sb->samples = NULL;
}

static struct usage_point point_of(const struct sbx *sb, const struct sample *s) {
  return (struct usage_point){.ms = s->ms,
                              .cpu_pct = s->v.cpu_pct,
                              .cpus = (unsigned)(cpus_of(sb) + 0.999),
                              .cpu_limit = cpus_of(sb),
                              .cpu_ns = s->v.cpu_ns,
                              .memory_used = s->v.memory,
                              .memory_cache = s->v.cache,
                              .memory_limit = sb->memory_mb << 20,
                              .disk_used = s->v.disk,
                              .disk_limit = s->v.disk_total ? s->v.disk_total : sb->disk_mb << 20,
                              .pids = s->v.pids};
}

void usage_points(struct sbx *sb, int64_t start_ms, int64_t end_ms,
                  void (*fn)(const struct usage_point *pt, void *arg), void *arg) {
  if (!sb->samples)
    usage_sample(sb);

  const struct samples *s = sb->samples;
  unsigned i = 0;
  for (unsigned r = 0; r < s->runs.n; r++) {
    const struct run *run = ring_at(&s->runs, sizeof *run, r);
    for (unsigned k = 0; k < run->n; k++, i++) {
      struct sample x = {.ms = *(int64_t *)ring_at(&s->ms, sizeof(int64_t), i), .v = run->v};
      if (x.ms >= start_ms && x.ms <= end_ms) {
        struct usage_point pt = point_of(sb, &x);
        fn(&pt, arg);
      }
    }
  }

  /* And now, measured since the last sample (not kept). */
  struct sample last, now;
  if (read_now(sb, last_of(s, &last), true, &now) == 0 && now.ms >= start_ms && now.ms <= end_ms) {
    if (sb->paused)
      now.v.cpu_pct = 0;
    struct usage_point pt = point_of(sb, &now);
    fn(&pt, arg);
  }
}

bool usage_last(const struct sbx *sb, struct usage_point *out) {
  struct sample x;
  const struct sample *last = last_of(sb->samples, &x);
  if (last)
    *out = point_of(sb, last);
  return last != NULL;
}

int usage_of(struct server *srv, const struct principal *p, const char *tenant,
             struct usage_total *out, struct hutch_err *err) {
  if (tenant && !p->admin && strcmp(tenant, p->tenant) != 0)
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden",
                          "only the admin key may read another tenant's usage");
  if (!tenant)
    tenant = p->tenant;

  *out = (struct usage_total){.tenant = tenant};
  if (store_usage_get(srv->store, tenant, &out->used, err) < 0) {
    err->kind = HUTCH_ERR_SYSTEM; /* a 500 whatever its errno, as it always was */
    err->errnum = 0;
    err->code = "internal";
    return -1;
  }

  const struct tally *t = tally_of(srv, tenant);
  if (t) {
    out->paused = t->paused;
    out->running = t->sandboxes - t->paused;
  }
  return 0;
}
