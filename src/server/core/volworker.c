/* Volume workers (volworker.h): sandboxes that hold a volume's files for
 * E2B's volume content API, and the tokens that open that API. */
#include "core/volworker.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "util.h"
#include "core/actions.h"
#include "core/sandboxes.h"
#include "core/sbx.h"
#include "core/server.h"
#include "core/volumes.h"
#include "state/store.h"

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

struct sbx *volworker_of(struct server *srv, const struct principal *p, const char *volume_id) {
  const char *id = json_string_value(json_object_get(srv->volworkers, volume_id));
  struct sbx *sb = id ? sbx_find_own(srv, p, id) : NULL;
  /* Paused or going (its tenant may pause or kill it): a new one serves. */
  if (sb && (sb->paused || sb->dying))
    sb = NULL;
  if (!sb && id)
    json_object_del(srv->volworkers, volume_id);
  return sb;
}

struct making {
  volworker_fn ready;
  void *arg;
  struct server *srv;
  char volume[64];
};

static bool always(void *arg) {
  (void)arg; /* a worker its first client left serves the next */
  return true;
}

static void made(struct sbx *sb, const struct hutch_err *err, void *arg) {
  struct making *m = arg;
  if (sb) {
    if (!m->srv->volworkers)
      m->srv->volworkers = json_object();
    json_object_set_new(m->srv->volworkers, m->volume, json_string(sb->id));
  }
  m->ready(sb, err, m->arg);
  free(m);
}

static const struct create_ops worker_ops = {.wanted = always, .made = made};

int volworker_get(struct server *srv, const struct principal *p, const char *volume_id,
                  struct sbx **out, volworker_fn ready, void *arg, struct hutch_err *err) {
  *out = volworker_of(srv, p, volume_id);
  if (*out) {
    act_set_timeout(*out, VOLWORKER_IDLE_S, true);
    return 1;
  }
  json_t *vol = volumes_find(srv, p->tenant, volume_id);
  if (!vol || strlen(volume_id) >= sizeof ((struct making *)0)->volume) {
    json_decref(vol);
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "volume_not_found", "no volume %s",
                          volume_id);
  }
  json_decref(vol);
  struct making *m = xcalloc(1, sizeof *m);
  m->ready = ready;
  m->arg = arg;
  m->srv = srv;
  snprintf(m->volume, sizeof m->volume, "%s", volume_id);
  struct create_req r;
  create_req_init(&r);
  r.template = "host";
  r.timeout_s = VOLWORKER_IDLE_S;
  r.volumes = json_pack("[{s:s,s:s}]", "name", volume_id, "path", VOLWORKER_MOUNT);
  r.metadata = json_pack("{s:s}", "hutch.volume", volume_id);
  int rc = sandboxes_create(srv, p, &r, &worker_ops, m, err);
  json_decref(r.volumes);
  json_decref(r.metadata);
  if (rc < 0) {
    free(m);
    return -1;
  }
  return 0;
}

void volworker_free_all(struct server *srv) {
  json_decref(srv->volworkers);
  srv->volworkers = NULL;
}
