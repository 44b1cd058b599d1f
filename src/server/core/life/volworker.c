/* Volume workers (volworker.h): sandboxes that hold a volume's files for
 * E2B's volume content API, and the tokens that open that API. */
#include "core/life/volworker.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "util.h"
#include "core/life/actions.h"
#include "core/life/sbx_create.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/disk/volumes.h"
#include "state/store.h"
#include "core/life/sbx_teardown.h"

void volworker_token(const struct server *srv, const char *tenant, const char *volume_id,
                     char out[VOLWORKER_TOKEN_LEN + 1]) {
  /* The tenant and the id, each ended by a NUL: no two pairs read alike. */
  size_t nt = strlen(tenant) + 1, nv = strlen(volume_id) + 1;
  _cleanup_free_ unsigned char *msg = xmalloc(nt + nv);
  memcpy(msg, tenant, nt);
  memcpy(msg + nt, volume_id, nv);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), srv->volume_key, sizeof srv->volume_key, msg, nt + nv, mac, &len);
  for (unsigned i = 0; i < 32 && i < len; i++)
    snprintf(out + 2 * i, 3, "%02x", mac[i]);
  out[VOLWORKER_TOKEN_LEN] = '\0';
}

bool volworker_token_ok(const struct server *srv, const char *tenant, const char *volume_id,
                        const char *token) {
  char want[VOLWORKER_TOKEN_LEN + 1];
  volworker_token(srv, tenant, volume_id, want);
  bool ok = token && strlen(token) == VOLWORKER_TOKEN_LEN &&
            CRYPTO_memcmp(want, token, VOLWORKER_TOKEN_LEN) == 0;
  explicit_bzero(want, sizeof want);
  return ok;
}

struct owner {
  const char *id;
  char tenant[SERVE_TENANT_LEN + 1];
};

static void owner_of(const struct store_volume *v, void *arg) {
  struct owner *o = arg;
  if (strcmp(v->id, o->id) == 0)
    snprintf(o->tenant, sizeof o->tenant, "%s", v->tenant);
}

int volworker_open(struct server *srv, const char *volume_id, const char *token,
                   struct principal *p) {
  struct owner o = {.id = volume_id};
  struct hutch_err err = {0};
  if (store_volume_each(srv->store, NULL, owner_of, &o, &err) < 0 || !o.tenant[0] ||
      !volworker_token_ok(srv, o.tenant, volume_id, token))
    return -1;
  memset(p, 0, sizeof *p);
  snprintf(p->tenant, sizeof p->tenant, "%s", o.tenant);
  snprintf(p->key_id, sizeof p->key_id, "volume");
  return 0;
}

/* A volume's worker: one per volume at most, being made (sbx empty, its
 * waiters queued) or up (sbx its id). */
struct vw_wait {
  struct vw_wait *next;
  volworker_fn ready;
  void *arg;
};
struct volworker {
  struct volworker *next;
  struct server *srv;
  char volume[64];
  char tenant[SERVE_TENANT_LEN + 1];
  char sbx[17];             /* "" while being made */
  unsigned holds;           /* actions under way on it */
  struct vw_wait *waits;    /* while being made */
  void (*ended)(void *arg); /* volworker_end's, when it came while being made */
  void *ended_arg;
};

/* While an action holds it, a worker's timeout stands this far off (the
 * transfer's own HTTP timeouts end a stalled one first). */
#define VOLWORKER_BUSY_S (24 * 3600)

static struct volworker *find(struct server *srv, const char *volume_id) {
  for (struct volworker *w = srv->volworkers; w; w = w->next)
    if (strcmp(w->volume, volume_id) == 0)
      return w;
  return NULL;
}

static void forget(struct volworker *gone) {
  for (struct volworker **w = &gone->srv->volworkers; *w; w = &(*w)->next)
    if (*w == gone) {
      *w = gone->next;
      break;
    }
  free(gone);
}

/* The worker's sandbox, if it is up and usable: a paused or going one (its
 * tenant may pause or kill it) is forgotten, and a new one serves. */
static struct sbx *live(struct volworker *w) {
  if (!w->sbx[0])
    return NULL;
  struct principal p = {0};
  snprintf(p.tenant, sizeof p.tenant, "%s", w->tenant);
  struct sbx *sb = sbx_find_own(w->srv, &p, w->sbx);
  if (!sb || sb->paused || sb->dying) {
    forget(w);
    return NULL;
  }
  return sb;
}

static void hold(struct volworker *w, struct sbx *sb) {
  if (w->holds++ == 0)
    actions_set_timeout(sb, VOLWORKER_BUSY_S, false);
}

void volworker_release(struct server *srv, const char *volume_id) {
  struct volworker *w = find(srv, volume_id);
  if (!w || !w->holds)
    return;
  w->holds--;
  if (w->holds)
    return;

  struct sbx *sb = live(w);
  if (sb)
    actions_set_timeout(sb, VOLWORKER_IDLE_S, false);
}

static bool always(void *arg) {
  (void)arg; /* A worker its first client left serves the next. */
  return true;
}

static void made(struct sbx *sb, const struct hutch_err *err, void *arg) {
  struct volworker *w = arg;
  struct vw_wait *waits = w->waits;
  void (*ended)(void *) = w->ended;
  void *ended_arg = w->ended_arg;
  struct hutch_err gone = {0};
  w->waits = NULL;

  if (sb && !ended) {
    snprintf(w->sbx, sizeof w->sbx, "%s", sb->id);
    sb->file_root = VOLWORKER_MOUNT;
  } else {
    hutch_err_fail(&gone, HUTCH_ERR_NOT_FOUND, "volume_not_found", "the volume is being deleted");
    forget(w); /* With no worker, the next use makes one (or finds no volume). */
    w = NULL;
  }

  /* Each waiter holds it, as volworker_get's callers do. */
  for (struct vw_wait *q = waits; q;) {
    struct vw_wait *next = q->next;
    if (w)
      hold(w, sb);
    q->ready(w ? sb : NULL, err ? err : &gone, q->arg);
    free(q);
    q = next;
  }

  if (sb && ended) /* Its volume is being deleted, so it goes at once. */
    sbx_destroy_then(sb, ended, ended_arg);
  else if (ended)
    ended(ended_arg);
}

static const struct create_ops worker_ops = {.wanted = always, .made = made};

int volworker_get(struct server *srv, const struct principal *p, const char *volume_id,
                  struct sbx **out, volworker_fn ready, void *arg, struct hutch_err *err) {
  struct volworker *w = find(srv, volume_id);
  *out = NULL;
  if (w && strcmp(w->tenant, p->tenant) == 0)
    *out = live(w);
  if (*out) {
    hold(w, *out);
    return 1;
  }

  w = find(srv, volume_id); /* live() may have forgotten it */
  if (w && strcmp(w->tenant, p->tenant) != 0)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "volume_not_found", "no volume %s", volume_id);
  if (!w) {
    json_t *vol = volumes_find(srv, p->tenant, volume_id);
    bool ok = vol && strcmp(json_string_value(json_object_get(vol, "id")), volume_id) == 0 &&
              strlen(volume_id) < sizeof w->volume;
    json_decref(vol);
    if (!ok)
      return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "volume_not_found", "no volume %s",
                            volume_id);

    w = xcalloc(1, sizeof *w);
    w->srv = srv;
    snprintf(w->volume, sizeof w->volume, "%s", volume_id);
    snprintf(w->tenant, sizeof w->tenant, "%s", p->tenant);

    struct create_req r;
    sbx_create_req_init(&r);
    r.template = "host";
    r.timeout_s = VOLWORKER_IDLE_S;
    r.volumes = json_pack("[{s:s,s:s}]", "name", volume_id, "path", VOLWORKER_MOUNT);
    r.metadata = json_pack("{s:s}", "hutch.volume", volume_id);
    int rc = sbx_create(srv, p, &r, &worker_ops, w, err);
    json_decref(r.volumes);
    json_decref(r.metadata);
    if (rc < 0) {
      free(w);
      return -1;
    }
    w->next = srv->volworkers;
    srv->volworkers = w;
  }

  /* Being made (by this call or an earlier one): one more to tell. */
  struct vw_wait *q = xcalloc(1, sizeof *q);
  q->ready = ready;
  q->arg = arg;
  q->next = w->waits;
  w->waits = q;
  return 0;
}

int volworker_end(struct server *srv, const struct principal *p, const char *volume_id,
                  void (*then)(void *arg), void *arg) {
  struct volworker *w = find(srv, volume_id);
  if (!w || strcmp(w->tenant, p->tenant) != 0)
    return 0;
  if (!w->sbx[0]) { /* being made: it goes as soon as it is */
    if (w->ended)
      return 0; /* one delete waits on it already: this one answers as if none */
    w->ended = then;
    w->ended_arg = arg;
    return 1;
  }
  struct sbx *sb = live(w);
  if (!sb)
    return 0;
  forget(w);
  sbx_destroy_then(sb, then, arg);
  return 1;
}

void volworker_free_all(struct server *srv) {
  while (srv->volworkers) {
    struct volworker *w = srv->volworkers;
    srv->volworkers = w->next;
    for (struct vw_wait *q = w->waits; q;) {
      struct vw_wait *next = q->next;
      free(q);
      q = next;
    }
    free(w);
  }
}
