/* Who a workload runs as (agent.h): "user" and "root" are hutch's own
 * accounts; a template's image may name others, by name or UID[:GID],
 * looked up in the sandbox's own /etc/passwd. That file is the sandbox's
 * (its root may rewrite it), so what it says can only choose among the
 * sandbox's own ids: every id below 65536 maps into the sandbox's range,
 * and a workload gets no capability whichever it is. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "layout.h"
#include "util.h"

#define PASSWD_MAX (4u << 20)

/* The /etc/passwd entry whose name is name (or, name NULL, whose uid is
 * uid): its ids and home. */
static bool passwd_find(const char *name, uid_t uid, struct who *w) {
  /* The sandbox's root chooses what /etc/passwd is: a fifo would block
   * this agent (and with it the step's timeout and every other job) on
   * open or read, a link to /dev/zero or an endless file would never
   * end. So a regular file only, opened without waiting, read up to
   * PASSWD_MAX bytes; what lies past it is not looked at. */
  int fd = open("/etc/passwd", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return false;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return false;
  }
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return false;
  }

  char line[1024];
  bool found = false;
  size_t seen = 0;
  while (!found && seen < PASSWD_MAX && fgets(line, sizeof line, f)) {
    seen += strlen(line) + 1;

    char *fields[7], *p = line;
    size_t n = 0;
    line[strcspn(line, "\n")] = '\0';
    while (n < 7 && p) {
      fields[n++] = p;
      p = strchr(p, ':');
      if (p)
        *p++ = '\0';
    }

    uint64_t u, g;
    if (n < 6 || !parse_u64(fields[2], &u) || !parse_u64(fields[3], &g) || u >= HUTCH_ID_RANGE ||
        g >= HUTCH_ID_RANGE)
      continue;

    if (name ? strcmp(fields[0], name) == 0 : u == uid) {
      w->uid = (uid_t)u;
      w->gid = (gid_t)g;
      str_copy(w->name, sizeof w->name, fields[0]);
      str_copy(w->home, sizeof w->home, fields[5][0] == '/' ? fields[5] : "/");
      found = true;
    }
  }

  fclose(f);
  return found;
}

int agent_who(const char *user, struct who *w, struct hutch_err *err) {
  if (!user || strcmp(user, HUTCH_USER_NAME) == 0) {
    *w = (struct who){HUTCH_USER_UID, HUTCH_USER_GID, HUTCH_USER_NAME, HUTCH_USER_HOME};
    return 0;
  }
  if (strcmp(user, "root") == 0) {
    *w = (struct who){0, 0, "root", "/root"};
    return 0;
  }

  if (!hutch_user_ok(user))
    return hutch_err_invalid(err, "no such user '%.64s'", user);

  if (user[0] >= '0' && user[0] <= '9') {
    /* UID[:GID]: hutch_user_ok checked both are below 65536. */
    unsigned long uid = strtoul(user, NULL, 10);
    const char *colon = strchr(user, ':');
    if (!passwd_find(NULL, (uid_t)uid, w))
      *w = (struct who){(uid_t)uid, (gid_t)uid, "", "/"};
    if (colon)
      w->gid = (gid_t)strtoul(colon + 1, NULL, 10);
    return 0;
  }

  if (!passwd_find(user, 0, w))
    return hutch_err_invalid(err, "no user '%s' in the sandbox's /etc/passwd", user);
  return 0;
}
