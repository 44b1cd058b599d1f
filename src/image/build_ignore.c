/* .dockerignore (build.h): one pattern a line, `#` comments, `!` for an
 * exception; the last pattern that matches a path, or one of its parent
 * directories, decides. Patterns match as Docker's do: `*`, `?` and
 * `[...]` within one name (fnmatch), `**` any number of names. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "cleanup.h"
#include "util.h"

#define IGNORE_MAX_BYTES (1u << 20)

struct build_ignore {
  char **pat;
  bool *except;
  size_t n;
};

static bool match_from(const char *pat, const char *path);

/* `**` followed by rest: any number of path's names, then rest. */
static bool match_any_depth(const char *rest, const char *path) {
  if (!*rest)
    return true;
  for (const char *p = path;; p += strcspn(p, "/") + 1) {
    if (match_from(rest, p))
      return true;
    if (!strchr(p, '/'))
      return false;
  }
}

/* Names of pattern and path from their starts, each up to '/' or the end. */
static bool match_from(const char *pat, const char *path) {
  for (;;) {
    size_t pl = strcspn(pat, "/"), nl = strcspn(path, "/");
    if (pl == 2 && strncmp(pat, "**", 2) == 0)
      return match_any_depth(pat[2] ? pat + 3 : pat + 2, path);
    if (!*path)
      return false;
    char ps[256], ns[256];
    if (pl >= sizeof ps || nl >= sizeof ns)
      return false;
    memcpy(ps, pat, pl), ps[pl] = '\0';
    memcpy(ns, path, nl), ns[nl] = '\0';
    if (fnmatch(ps, ns, 0) != 0)
      return false;

    pat += pl, path += nl;
    if (!*pat)
      return !*path;
    if (!*path)
      return false;
    pat++, path++;
  }
}

bool build_match(const char *pattern, const char *path) {
  while (pattern[0] == '/')
    pattern++;
  return match_from(pattern, path);
}

bool build_ignored(const struct build_ignore *ig, const char *path) {
  if (!ig)
    return false;
  bool out = false;
  for (size_t i = 0; i < ig->n; i++) {
    bool m = build_match(ig->pat[i], path);
    /* A pattern that names a directory excludes what is under it. */
    _cleanup_free_ char *dir = xstrdup(path);
    for (char *s; !m && (s = strrchr(dir, '/'));) {
      *s = '\0';
      m = build_match(ig->pat[i], dir);
    }
    if (m)
      out = !ig->except[i];
  }
  return out;
}

/* A pattern as Docker cleans it: no "./" parts, no trailing '/'. */
static char *clean_pattern(const char *s, size_t n) {
  char *p = xasprintf("%.*s", (int)n, s);
  char *w = p;
  for (char *r = p; *r;) {
    if (r[0] == '.' && (r[1] == '/' || !r[1]) && (r == p || r[-1] == '/')) {
      r += r[1] ? 2 : 1;
      continue;
    }
    if (r[0] == '/' && (w == p || w[-1] == '/')) {
      r++;
      continue;
    }
    *w++ = *r++;
  }
  while (w > p && w[-1] == '/')
    w--;
  *w = '\0';
  return p;
}

/* One line of .dockerignore, trimmed: a pattern added unless it is blank
 * or a comment. */
static void add_line(struct build_ignore *ig, char *line) {
  size_t len = strlen(line);
  while (len && strchr(" \t\r", line[len - 1]))
    len--;
  while (len && (*line == ' ' || *line == '\t'))
    line++, len--;
  if (!len || line[0] == '#')
    return;

  bool except = line[0] == '!';
  ig->pat = xrealloc(ig->pat, (ig->n + 1) * sizeof *ig->pat);
  ig->except = xrealloc(ig->except, (ig->n + 1) * sizeof *ig->except);
  ig->pat[ig->n] = clean_pattern(line + except, len - except);
  ig->except[ig->n++] = except;
}

int build_ignore_load(int context_fd, struct build_ignore **out, struct hutch_err *err) {
  *out = NULL;
  _cleanup_close_ int fd = openat(context_fd, ".dockerignore", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : hutch_err_invalid(err, ".dockerignore: %s", strerror(errno));

  _cleanup_free_ char *text = xmalloc(IGNORE_MAX_BYTES + 1);
  ssize_t n = read_all(fd, text, IGNORE_MAX_BYTES + 1);
  if (n < 0 || n > IGNORE_MAX_BYTES)
    return hutch_err_invalid(err, ".dockerignore: %s",
                             n < 0 ? strerror(errno) : "larger than 1 MiB");
  text[n] = '\0';

  struct build_ignore *ig = xcalloc(1, sizeof *ig);
  for (char *line = text, *next; line; line = next) {
    next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    add_line(ig, line);
  }
  *out = ig;
  return 0;
}

bool build_ignore_has_exceptions(const struct build_ignore *ig) {
  for (size_t i = 0; ig && i < ig->n; i++)
    if (ig->except[i])
      return true;
  return false;
}

void build_ignore_free(struct build_ignore *ig) {
  if (!ig)
    return;
  for (size_t i = 0; i < ig->n; i++)
    free(ig->pat[i]);
  free(ig->pat);
  free(ig->except);
  free(ig);
}
