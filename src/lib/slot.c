/* Sandbox slots (slot.h): claiming a free slot's cgroup and locking it,
 * removing one, and collecting the slots that crashed runs left behind. */
#include "slot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "sandbox.h"
#include "util.h"

/* A cgroup younger than this is never collected: its creator may not have
 * taken the lock yet. */
#define GC_MIN_AGE_S 10

_Static_assert(HUTCH_UID_BASE + (uint64_t)HUTCH_SLOTS_LOW * HUTCH_ID_RANGE <= 0x7FFE0000u,
               "low slots end below systemd's foreign-uid range");
_Static_assert(HUTCH_UID_HIGH + (uint64_t)(HUTCH_SLOTS - HUTCH_SLOTS_LOW) * HUTCH_ID_RANGE <=
                   0xFFFF0000u,
               "high slots end below (uid_t)-2");

int hutch_slot_claim(const struct hutch_cgroup *root, unsigned ctls, unsigned *slot,
                     struct hutch_cgroup *cg, struct hutch_err *err) {
  unsigned start = 0;
  if (getrandom(&start, sizeof start, 0) < 0)
    start = (unsigned)now_ns();

  /* The low slots first (from a random one), the high ones only when all
   * those are taken: host tools print ids past 2^31 as negative numbers,
   * and most hosts never need them. */
  for (unsigned i = 0; i < HUTCH_SLOTS; i++) {
    unsigned s = i < HUTCH_SLOTS_LOW
                     ? (start + i) % HUTCH_SLOTS_LOW
                     : HUTCH_SLOTS_LOW + (start + i) % (HUTCH_SLOTS - HUTCH_SLOTS_LOW);
    char name[16];
    snprintf(name, sizeof name, "%u", s);

    if (root->ops->mkchild(root, name, ctls, cg, err) < 0) {
      memset(cg, 0, sizeof *cg);
      if (err->errnum == EEXIST)
        continue;
      return -1;
    }

    int lock = openat(hutch_cg_fd(cg, CG_MEMORY), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0) {
      /* Only the collector locks a fresh cgroup, and it skips fresh ones. */
      hutch_err_set(err, errno, "lock sandbox cgroup %s", name);
      if (lock >= 0)
        close(lock);
      hutch_cgroup_close(cg);
      memset(cg, 0, sizeof *cg);
      root->ops->rmchild(root, name, err);
      return -1;
    }

    *slot = s;
    return lock;
  }

  return hutch_err_set(err, EAGAIN, "all %u sandbox slots are in use", HUTCH_SLOTS);
}

/* Remove the child cgroups (agent, exec leaves) of dirfd/name. */
static int remove_children(int parent, const char *name, struct hutch_err *err) {
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return errno == ENOENT ? 0 : hutch_err_set(err, errno, "open sandbox cgroup %s", name);
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return hutch_err_set(err, errno, "list sandbox cgroup %s", name);
  }
  int ret = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_type == DT_DIR && e->d_name[0] != '.' && hutch_cg_rmdir(dirfd(d), e->d_name, err) < 0)
      ret = -1;
  closedir(d);
  return ret;
}

int hutch_slot_remove(const struct hutch_cgroup *root, unsigned slot, struct hutch_err *err) {
  char name[16];
  snprintf(name, sizeof name, "%u", slot);
  for (int i = 0; i < root->nfd; i++)
    if (remove_children(root->fd[i], name, err) < 0)
      return -1;
  return root->ops->rmchild(root, name, err);
}

static bool collectable(const struct hutch_cgroup *root, const char *name) {
  struct stat st;
  struct hutch_cgroup cg;
  struct hutch_err ignored;
  if (fstatat(hutch_cg_fd(root, CG_MEMORY), name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
      st.st_mtime > time(NULL) - GC_MIN_AGE_S)
    return false;
  /* The lock first: a live sandbox's slot (held) costs an open and a
   * flock, not an open in every hierarchy, on each pass over thousands. */
  _cleanup_close_ int lock =
      openat(hutch_cg_fd(root, CG_MEMORY), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
    return false;
  if (root->ops->open(root, name, &cg, &ignored) < 0)
    return true; /* half-made: missing from a hierarchy */
  bool free = lock >= 0 && !root->ops->populated(&cg);
  hutch_cgroup_close(&cg);
  return free;
}

void hutch_slot_gc(const struct hutch_cgroup *root) {
  int dup = openat(hutch_cg_fd(root, CG_MEMORY), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
  if (!d) {
    if (dup >= 0)
      close(dup);
    return;
  }
  for (struct dirent *e; (e = readdir(d));) {
    uint64_t slot;
    struct hutch_err ignored;
    if (e->d_type != DT_DIR || !parse_u64(e->d_name, &slot) || slot >= HUTCH_SLOTS)
      continue;
    if (collectable(root, e->d_name))
      hutch_slot_remove(root, (unsigned)slot, &ignored);
  }
  closedir(d);
}
