/* The sandbox's side of `hutch cp` (cp_remote.h): stat, list and mkdir
 * as ordinary calls; a file's bytes over a curl handle of their own,
 * streamed (the shared client keeps an answer whole in memory). */
#include "cp_remote.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define ERR_BODY_MAX 65536 /* a refusal's body kept, to say its message */

void cp_entry_free(struct cp_entry *e) {
  free(e->name);
  free(e->path);
  free(e->target);
  memset(e, 0, sizeof *e);
}

static void entry_of(json_t *j, struct cp_entry *e) {
  const char *type = json_string_value(json_object_get(j, "type"));
  const char *target = json_string_value(json_object_get(j, "target"));
  e->name = xstrdup(json_string_value(json_object_get(j, "name")) ?: "");
  e->path = xstrdup(json_string_value(json_object_get(j, "path")) ?: "");
  e->target = target ? xstrdup(target) : NULL;
  static const char *const names[] = {[CP_FILE] = "file", [CP_DIR] = "dir", [CP_LINK] = "symlink"};
  e->type = CP_OTHER;
  for (int t = CP_FILE; t <= CP_LINK; t++)
    if (type && strcmp(type, names[t]) == 0)
      e->type = (enum cp_type)t;
  e->size = (uint64_t)json_integer_value(json_object_get(j, "size"));
  e->mode = (unsigned)json_integer_value(json_object_get(j, "mode"));
  e->mtime = json_number_value(json_object_get(j, "mtime"));
}

static char *files_path(const struct cp_remote *r, const char *route, const char *path) {
  char *sid = hc_escape(r->sandbox), *p = hc_escape(path);
  char *s = xasprintf("/v1/sandboxes/%s/files%s?path=%s", sid, route, p);
  free(sid);
  free(p);
  return s;
}

int cp_stat(const struct cp_remote *r, const char *path, struct cp_entry *e) {
  char *url = files_path(r, "/stat", path);
  struct hc_req req = {.method = "GET", .path = url};
  struct hc_answer a;
  int ret = -1;
  if (!hc_call(&r->ctl->client, &req, &a)) {
    ctl_fail(r->ctl, CTL_EXIT_UNREACHABLE, "%s", a.message);
  } else if (a.status == 404 && strcmp(a.code, "not_found") == 0) {
    ret = 1;
  } else if (a.status >= 400) {
    ctl_fail(r->ctl, CTL_EXIT_FAILED, "%s: %s: %s", path, a.code, a.message);
  } else {
    entry_of(a.json, e);
    ret = 0;
  }
  hc_answer_free(&a);
  free(url);
  return ret;
}

int cp_list(const struct cp_remote *r, const char *path, struct cp_entry **es, size_t *n) {
  char *url = files_path(r, "/list", path);
  struct hc_req req = {.method = "GET", .path = url};
  struct hc_answer a;
  int ret = -1;
  if (ctl_call(r->ctl, &req, &a) == 0) {
    json_t *list = json_object_get(a.json, "entries");
    *n = json_array_size(list);
    *es = xcalloc(*n ? *n : 1, sizeof **es);
    for (size_t i = 0; i < *n; i++)
      entry_of(json_array_get(list, i), &(*es)[i]);
    ret = 0;
  }
  hc_answer_free(&a);
  free(url);
  return ret;
}

int cp_mkdir(const struct cp_remote *r, const char *path) {
  char *sid = hc_escape(r->sandbox);
  char *url = xasprintf("/v1/sandboxes/%s/files/mkdir", sid);
  json_t *j = json_pack("{s:s,s:b}", "path", path, "parents", 1);
  char *body = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  struct hc_req req = {.method = "POST", .path = url, .body = body, .body_len = strlen(body)};
  struct hc_answer a;
  int ret = ctl_call(r->ctl, &req, &a) == 0 ? 0 : -1;
  hc_answer_free(&a);
  free(body);
  free(url);
  free(sid);
  return ret;
}

/* ---- bytes streamed ---- */

struct xfer {
  const struct cp_remote *r;
  const char *path;
  CURL *h;
  cp_sink_fn *sink;
  cp_source_fn *source;
  void *arg;
  bool local_failed;
  char *err; /* a refusal's body */
  size_t err_len;
  uint64_t total;
  struct timespec drawn;
};

/* The bar: the file, its share done, redrawn at most ten times a second. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
  (void)dltotal, (void)ultotal;
  struct xfer *x = arg;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long ms = (now.tv_sec - x->drawn.tv_sec) * 1000 + (now.tv_nsec - x->drawn.tv_nsec) / 1000000;
  if (!x->r->progress || ms < 100)
    return 0;
  x->drawn = now;
  uint64_t done = (uint64_t)(dlnow > ulnow ? dlnow : ulnow);
  int pct = x->total ? (int)(done * 100 / x->total) : 100;
  pct = pct > 100 ? 100 : pct;
  char bar[21];
  memset(bar, '#', (size_t)pct / 5);
  memset(bar + pct / 5, '.', 20 - (size_t)pct / 5);
  bar[20] = '\0';
  /* The sandbox named the file (ctl_clean), cut to 40 bytes where a
   * character ends. */
  char *name = ctl_clean(x->path, CTL_CLEAN_TEXT);
  size_t cut = strlen(name);
  if (cut > 40)
    for (cut = 40; cut && (name[cut] & 0xc0) == 0x80; cut--)
      ;
  fprintf(stderr, "\r\033[K%-40.*s [%s] %3d%% %.1f MiB", (int)cut, name, bar, pct,
          (double)done / (1 << 20));
  free(name);
  return 0;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg) {
  struct xfer *x = arg;
  size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300 || !x->sink) {
    size_t keep = x->err_len + n > ERR_BODY_MAX ? ERR_BODY_MAX - x->err_len : n;
    x->err = xrealloc(x->err, x->err_len + keep + 1);
    memcpy(x->err + x->err_len, data, keep);
    x->err_len += keep;
    x->err[x->err_len] = '\0';
    return n;
  }
  if (!x->sink(x->arg, data, n)) {
    x->local_failed = true;
    return 0; /* cuts the transfer */
  }
  return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *arg) {
  struct xfer *x = arg;
  size_t n = x->source(x->arg, buf, size * nmemb);
  if (n == (size_t)-1) {
    x->local_failed = true;
    return CURL_READFUNC_ABORT;
  }
  return n;
}

/* One transfer on its own handle; -1 (said) unless it ended in a 2xx. */
static int transfer(struct xfer *x, const char *route) {
  char *path = files_path(x->r, route, x->path);
  char *url = xasprintf("%s%s", x->r->ctl->client.url, path);
  char *auth = xasprintf("Authorization: Bearer %s", x->r->ctl->client.key);
  struct curl_slist *hdrs = curl_slist_append(NULL, auth);
  hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
  x->h = curl_easy_init();
  curl_easy_setopt(x->h, CURLOPT_URL, url);
  curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, hdrs);
  hc_curl_opts(&x->r->ctl->client, x->h);
  curl_easy_setopt(x->h, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(x->h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(x->h, CURLOPT_XFERINFODATA, x);
  curl_easy_setopt(x->h, CURLOPT_NOPROGRESS, 0L);
  if (x->source) {
    curl_easy_setopt(x->h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(x->h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(x->h, CURLOPT_READDATA, x);
    curl_easy_setopt(x->h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->total);
  }

  CURLcode rc = curl_easy_perform(x->h);
  long status = 0;
  curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
  if (x->r->progress)
    fprintf(stderr, "\r\033[K");
  int ret = 0;
  if (x->local_failed) {
    ret = -1;
  } else if (status >= 300) {
    json_t *j = json_loadb(x->err ? x->err : "", x->err_len, 0, NULL);
    json_t *e = json_object_get(j, "error");
    ctl_fail(x->r->ctl, CTL_EXIT_FAILED, "%s: %s: %s", x->path,
             json_string_value(json_object_get(e, "code")) ?: "error",
             json_string_value(json_object_get(e, "message")) ?: "the server refused");
    json_decref(j);
    ret = -1;
  } else if (rc != CURLE_OK) {
    ctl_fail(x->r->ctl, CTL_EXIT_FAILED, "%s: %s", x->path, curl_easy_strerror(rc));
    ret = -1;
  }
  curl_easy_cleanup(x->h);
  curl_slist_free_all(hdrs);
  free(x->err);
  free(auth);
  free(url);
  free(path);
  return ret;
}

int cp_get(const struct cp_remote *r, const char *path, uint64_t size, cp_sink_fn *sink,
           void *arg) {
  struct xfer x = {.r = r, .path = path, .sink = sink, .arg = arg, .total = size};
  return transfer(&x, "");
}

int cp_put(const struct cp_remote *r, const char *path, uint64_t size, cp_source_fn *source,
           void *arg) {
  struct xfer x = {.r = r, .path = path, .source = source, .arg = arg, .total = size};
  return transfer(&x, "");
}
