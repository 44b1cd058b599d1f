/* Making a directory with its missing parents (mkdir.h). */
#include "mkdir.h"

#include <errno.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "util.h"

/* One directory; one that exists already is no failure. errno is kept for
 * the caller past the error's formatting. */
static int make_one(const char *dir, mode_t mode, struct hutch_err *err) {
  if (mkdir(dir, mode) == 0 || errno == EEXIST)
    return 0;

  int e = errno;
  hutch_err_set(err, e, "mkdir %s", dir);
  errno = e;
  return -1;
}

int mkdir_p(const char *path, mode_t mode, struct hutch_err *err) {
  _cleanup_free_ char *p = xstrdup(path);

  for (char *s = p + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    if (make_one(p, 0755, err) < 0)
      return -1;
    *s = '/';
  }

  return make_one(p, mode, err);
}
