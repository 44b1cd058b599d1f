/* The server's isolation tiers (server.h): runsc probed once at start, and
 * the floor no request, template label or snapshot lowers. */
#include "core/base/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util.h"

int server_tiers(struct server *srv, struct hutch_err *err) {
  struct hutch_err why = {0};
  srv->has_gvisor = hutch_gvisor_probe(&srv->gvisor, srv->cfg.gvisor_platform, &why) == 0;
  if (srv->has_gvisor)
    return 0;
  str_copy(srv->gvisor_why, sizeof srv->gvisor_why, why.msg);
  /* A platform asked for and not usable is the operator's mistake, as is
   * a default tier the server cannot offer: said once, at start. */
  if (srv->cfg.isolation == HUTCH_ISOLATION_GVISOR || srv->cfg.gvisor_platform) {
    *err = why;
    return hutch_err_wrap(err, "--isolation gvisor");
  }
  return 0;
}

int server_tier(const struct server *srv, enum hutch_isolation iso,
                struct hutch_sandbox_config *cfg, struct hutch_err *err) {
  cfg->isolation = iso;
  cfg->gvisor = NULL;
  /* A tenant's request, an image's label or a snapshot chooses among the
   * tiers the operator allows, never below them: internet-sourced code
   * must not pick its own sandbox. */
  if (iso < srv->cfg.isolation_min)
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "isolation_floor",
                          "this server runs no sandbox below the %s tier (--isolation-min): "
                          "%s was asked",
                          hutch_isolation_name(srv->cfg.isolation_min), hutch_isolation_name(iso));
  if (iso != HUTCH_ISOLATION_GVISOR)
    return 0;
  if (!srv->has_gvisor)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "gvisor_unavailable",
                          "this server cannot run the gvisor tier: %s", srv->gvisor_why);
  cfg->gvisor = &srv->gvisor;
  return 0;
}
