/* The tiers' tables, and the public calls that go through them
 * (backend.h). Both tiers today share the shell (shell.h): the gvisor
 * tier differs inside it (spawn.c, rootfs.c, gvisor.c: what the first
 * process runs) and in what it cannot do. */
#include "backend.h"

#include <stddef.h>

#include "shell.h"

/* gVisor's agent has no socket on the host to come back to: its sockets
 * are gVisor's (docs/isolation.md). Its shell can still be owned, to be
 * destroyed (no listen_dir). */
static int gvisor_adopt(const char *id, unsigned slot, pid_t pid, const char *listen_dir,
                        struct hutch_sandbox **out, struct hutch_err *err) {
  if (!listen_dir) {
    if (hutch_shell_adopt(id, slot, pid, NULL, out, err) < 0)
      return -1;
    (*out)->isolation = HUTCH_ISOLATION_GVISOR;
    return 0;
  }
  return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "not_adoptable",
                        "sandbox %s is in the gvisor tier, which a restarted server cannot take "
                        "over",
                        id);
}

/* What both tiers do alike, in the shell. */
#define SHELL_OPS                                                                               \
  .create = hutch_shell_create, .freeze = hutch_shell_freeze, .usage = hutch_shell_usage,       \
  .socket = hutch_shell_socket, .storage = hutch_shell_storage, .destroy = hutch_shell_destroy, \
  .release = hutch_shell_release

static const struct hutch_backend backends[] = {
    [HUTCH_ISOLATION_NS] =
        {
            .name = "ns",
            .isolation = HUTCH_ISOLATION_NS,
            .can = HUTCH_CAN_ADOPT | HUTCH_CAN_ESCAPES | HUTCH_CAN_EXEC_MEMORY | HUTCH_CAN_BUILD |
                   HUTCH_CAN_HOST_KERNEL,
            SHELL_OPS,
            .adopt = hutch_shell_adopt,
        },
    [HUTCH_ISOLATION_GVISOR] =
        {
            .name = "gvisor",
            .isolation = HUTCH_ISOLATION_GVISOR,
            .can = 0,
            SHELL_OPS,
            .adopt = gvisor_adopt,
        },
};

const struct hutch_backend *hutch_backend_of(enum hutch_isolation i) {
  return i == HUTCH_ISOLATION_GVISOR ? &backends[HUTCH_ISOLATION_GVISOR]
                                     : &backends[HUTCH_ISOLATION_NS];
}

const char *hutch_isolation_name(enum hutch_isolation i) {
  return hutch_backend_of(i)->name;
}

int hutch_sandbox_create(const struct hutch_sandbox_config *cfg, struct hutch_sandbox **out,
                         struct hutch_err *err) {
  return hutch_backend_of(cfg->isolation)->create(cfg, out, err);
}

int hutch_sandbox_adopt(enum hutch_isolation tier, const char *id, unsigned slot, pid_t pid,
                        const char *listen_dir, struct hutch_sandbox **out, struct hutch_err *err) {
  return hutch_backend_of(tier)->adopt(id, slot, pid, listen_dir, out, err);
}

int hutch_sandbox_freeze(struct hutch_sandbox *sb, bool frozen, struct hutch_err *err) {
  return hutch_backend_of(sb->isolation)->freeze(sb, frozen, err);
}

int hutch_sandbox_usage(const struct hutch_sandbox *sb, bool disk, struct hutch_sandbox_usage *u,
                        struct hutch_err *err) {
  return hutch_backend_of(sb->isolation)->usage(sb, disk, u, err);
}

int hutch_sandbox_socket(const struct hutch_sandbox *sb, int own_netns, int domain, int type,
                         struct hutch_err *err) {
  return hutch_backend_of(sb->isolation)->socket(sb, own_netns, domain, type, err);
}

int hutch_sandbox_storage(const struct hutch_sandbox *sb) {
  return hutch_backend_of(sb->isolation)->storage(sb);
}

int hutch_sandbox_destroy(struct hutch_sandbox *sb, struct hutch_err *err) {
  return hutch_backend_of(sb->isolation)->destroy(sb, err);
}

void hutch_sandbox_release(struct hutch_sandbox *sb) {
  hutch_backend_of(sb->isolation)->release(sb);
}
