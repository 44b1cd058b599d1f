/* The sandbox shell both tiers are built in (shell.c; adopting one,
 * shell_adopt.c): slot and host id range, cgroup, storage and overlay
 * root, network namespace, and the first process, which execs the agent
 * (ns) or starts runsc (gvisor). These are the ns tier's operations;
 * backend.c says which the gvisor tier shares. Only backend.c calls them. */
#ifndef HUTCH_SHELL_H
#define HUTCH_SHELL_H

#include "sandbox.h"

int hutch_shell_create(const struct hutch_sandbox_config *cfg, struct hutch_sandbox **out,
                       struct hutch_err *err);
int hutch_shell_adopt(const char *id, unsigned slot, pid_t pid, const char *listen_dir,
                      struct hutch_sandbox **out, struct hutch_err *err);
int hutch_shell_freeze(struct hutch_sandbox *sb, bool frozen, struct hutch_err *err);
int hutch_shell_usage(const struct hutch_sandbox *sb, bool disk, struct hutch_sandbox_usage *u,
                      struct hutch_err *err);
int hutch_shell_socket(const struct hutch_sandbox *sb, int own_netns, int domain, int type,
                       struct hutch_err *err);
int hutch_shell_storage(const struct hutch_sandbox *sb);
int hutch_shell_destroy(struct hutch_sandbox *sb, struct hutch_err *err);
void hutch_shell_release(struct hutch_sandbox *sb);

/* What shell.c shares with shell_adopt.c, which takes over a sandbox as
 * shell.c makes one. The storage the agent holds for us, taken by its
 * pidfd: an fd of the sandbox's storage tmpfs, or -1. */
int hutch_shell_storage_of(int pidfd);
/* Let go of sb->root, the hutch cgroup, which a sandbox holds only while
 * it is made, adopted or ended. */
void hutch_shell_close_root(struct hutch_sandbox *sb);

#endif
