/* GET /ui and /ui/…: the web console's files (share/ui; docs/console.md),
 * and under /ui/vendor/ the terminal's library, installed at build time
 * (scripts/ui-vendor.sh). Nothing else is served from disk here. */
#include "api/console.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"
#include "core/base/server.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/request.h"

#define UI_FILE_MAX (4u << 20) /* the largest file served (xterm.mjs is ~0.4 MiB) */
#define UI_PATH_MAX 128        /* the longest path under /ui/ */

struct console {
  int dir;    /* share/ui */
  int vendor; /* the vendored files; -1: none were installed */
};

/* Every file under /ui is served with these. The console is a page that holds
 * an API key: no script or style but its own files may run (so an
 * injected string can never become code), it fetches only from this
 * server, no other site may frame it (clickjacking), and no URL it loads
 * tells another site where it came from. */
#define UI_HEADERS                                                                            \
  "Content-Security-Policy: default-src 'self'; script-src 'self'; style-src 'self'; "        \
  "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; " \
  "form-action 'none'\r\n"                                                                    \
  "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n"

static const struct {
  const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
};

static const char *type_of(const char *path) {
  const char *dot = strrchr(path, '.');
  for (size_t i = 0; dot && i < ARRAY_SIZE(types); i++)
    if (strcmp(dot, types[i].ext) == 0)
      return types[i].type;
  return NULL;
}

static int open_dir(const char *path) {
  return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static bool has_index(int dir) {
  return dir >= 0 && faccessat(dir, "index.html", R_OK, 0) == 0;
}

/* The directory of the server's own program. */
static bool exe_dir(char out[PATH_MAX]) {
  ssize_t n = readlink("/proc/self/exe", out, PATH_MAX - 1);
  if (n <= 0)
    return false;
  out[n] = '\0';
  char *slash = strrchr(out, '/');
  if (slash)
    *slash = '\0';
  return true;
}

/* share/ui: --ui-dir; else where make install puts it beside the program
 * (PREFIX/bin → PREFIX/share/hutch/ui); else the source tree the program
 * was built from (HUTCH_UI_SOURCE, meson.build). The vendored files: the
 * ui dir's vendor/ (installed), else the build dir's (HUTCH_UI_VENDOR). */
int api_console_open(struct server *srv, struct hutch_err *err) {
  if (srv->cfg.no_ui)
    return 0;
  int dir = -1;
  if (srv->cfg.ui_dir) {
    dir = open_dir(srv->cfg.ui_dir);
    if (!has_index(dir)) {
      if (dir >= 0)
        close(dir);
      return hutch_err_invalid(err, "--ui-dir %s: no index.html there", srv->cfg.ui_dir);
    }
  }
  char exe[PATH_MAX];
  if (dir < 0 && exe_dir(exe)) {
    _cleanup_free_ char *beside = xasprintf("%s/../share/hutch/ui", exe);
    dir = open_dir(beside);
    if (!has_index(dir) && dir >= 0) {
      close(dir);
      dir = -1;
    }
  }
  if (dir < 0)
    dir = open_dir(HUTCH_UI_SOURCE);
  if (!has_index(dir)) {
    if (dir >= 0)
      close(dir);
    fprintf(stderr, "hutch serve: no console at /ui: its files (share/ui) were not found\n");
    return 0;
  }

  srv->console = xcalloc(1, sizeof *srv->console);
  srv->console->dir = dir;
  srv->console->vendor = openat(dir, "vendor", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (srv->console->vendor < 0)
    srv->console->vendor = open_dir(HUTCH_UI_VENDOR);
  return 0;
}

void api_console_close(struct server *srv) {
  if (!srv->console)
    return;
  close(srv->console->dir);
  if (srv->console->vendor >= 0)
    close(srv->console->vendor);
  free(srv->console);
  srv->console = NULL;
}

/* A path asked for is taken only as plain names: letters, digits, '-',
 * '_' and '.', no name starting with '.' (so no "..", no hidden file, and
 * no %-escape, which the HTTP layer leaves undecoded), and it is opened
 * beneath the directory with no symlink followed, so neither a request
 * nor a link someone put in the tree reaches a file outside it. */
static bool plain_path(const char *path) {
  size_t n = strlen(path);
  if (n == 0 || n > UI_PATH_MAX || path[0] == '/' || path[n - 1] == '/')
    return false;
  for (const char *s = path; *s; s++) {
    if ((s == path || s[-1] == '/') && (*s == '.' || *s == '/'))
      return false;
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./", *s))
      return false;
  }
  return true;
}

static int open_beneath(int dir, const char *path) {
  struct open_how how = {.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
                         .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                    RESOLVE_NO_XDEV};
  return (int)syscall(SYS_openat2, dir, path, &how, sizeof how);
}

static void not_found(struct http_conn *c, const char *why) {
  http_error(c, HUTCH_ERR_NOT_FOUND, "not_found", "%s", why);
}

/* The file's bytes, answered with its type and an ETag of its identity
 * (device, inode, size, mtime): 304 when the browser holds it already. */
static void send_file(struct http_conn *c, int fd, const char *type) {
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > UI_FILE_MAX) {
    not_found(c, "no such file in the console");
    return;
  }
  char etag[96];
  snprintf(etag, sizeof etag, "\"%llx-%llx-%llx-%llx\"", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
           (unsigned long long)st.st_mtim.tv_sec * 1000000000ull + st.st_mtim.tv_nsec);
  _cleanup_free_ char *extra =
      xasprintf(UI_HEADERS "Cache-Control: no-cache\r\nETag: %s\r\n", etag);
  const char *given = http_header(&c->req, "If-None-Match");
  if (given && strcmp(given, etag) == 0) {
    http_respond(c, 304, type, "", 0, extra);
    return;
  }

  _cleanup_free_ char *body = xmalloc((size_t)st.st_size + 1);
  ssize_t n = read_all(fd, body, (size_t)st.st_size);
  if (n != st.st_size) {
    http_error(c, HUTCH_ERR_SYSTEM, "internal", "reading a console file: %s",
               n < 0 ? strerror(errno) : "it changed while read");
    return;
  }
  http_respond(c, 200, type, body, (size_t)n, extra);
}

void api_console_file(struct http_conn *c, const struct principal *p) {
  (void)p;
  struct console *ui = c->srv->console;
  const char *path = c->req.path + strlen("/ui");
  if (!ui) {
    not_found(c, c->srv->cfg.no_ui ? "the console is off (hutch serve --no-ui)"
                                   : "the console's files were not found (share/ui)");
    return;
  }
  if (path[0] == '\0') { /* /ui → /ui/, so the page's relative URLs resolve */
    http_respond(c, 308, "text/plain", "", 0, UI_HEADERS "Location: /ui/\r\n");
    return;
  }
  path++;
  if (path[0] == '\0')
    path = "index.html";

  /* The vendored files are a flat list: vendor/NAME, no deeper (npm's
   * own tree sits beside them in the build dir). */
  int dir = ui->dir;
  if (strncmp(path, "vendor/", 7) == 0) {
    dir = strchr(path + 7, '/') ? -1 : ui->vendor;
    path += 7;
  }
  const char *type = type_of(path);
  _cleanup_close_ int fd = dir >= 0 && type && plain_path(path) ? open_beneath(dir, path) : -1;
  if (fd < 0) {
    not_found(c, "no such file in the console");
    return;
  }
  send_file(c, fd, type);
}
