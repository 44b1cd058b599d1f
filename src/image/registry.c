/* The registry client (registry.h): HTTP API v2 over libcurl, one easy
 * handle per pull, its requests one after the other. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "digest.h"
#include "oci.h"
#include "registry.h"
#include "unpack.h"
#include "util.h"

#define MEDIA_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* Bounds on what a registry sends that is held in memory. */
#define MANIFEST_MAX (4u << 20)
#define TOKEN_MAX (64u << 10)
#define ERROR_BODY_MAX (64u << 10)
#define CONNECT_SECONDS 15L
/* Manifests and tokens are small: a whole request of them ends in this. */
#define SMALL_REQUEST_SECONDS 300L
#define LOW_SPEED_BYTES 1024L
#define MAX_REDIRECTS 5L

struct registry {
  struct registry_ref ref;
  struct registry_opts opts;
  enum registry_scope scope;
  CURL *h;
  char *bearer;  /* "Authorization: Bearer ..." once a token was given */
  bool basic;    /* the registry asked for Basic auth: opts.user goes along */
  uint64_t used; /* bytes of bodies received so far, against opts.max_bytes */
  char blocked[INET6_ADDRSTRLEN];
  char errbuf[CURL_ERROR_SIZE];
};

/* Where one response's body goes: memory (a manifest, a token) or a file
 * (a blob, its digest computed on the way). A body of any status but 200
 * goes to `errbody` instead, for the error message. */
struct sink {
  struct registry *r;
  char *buf;
  size_t len;
  uint64_t limit; /* the most bytes this body may have */
  int fd;         /* -1: memory */
  EVP_MD_CTX *md;
  registry_progress_fn progress;
  void *arg;
  uint64_t got, last_ns;
  char errbody[512];
  size_t errlen, errseen;
  long errstatus;
  bool failed;
  struct hutch_err fail;
};

/* What a registry says goes into a one-line message: printable ASCII. */
static void printable(char *dst, size_t size, const char *src, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 1 < size; i++)
    dst[o++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
  dst[o] = '\0';
}

/* A response other than 200 (status): the start of its body kept for the
 * error, and reading it ended past ERROR_BODY_MAX. */
static size_t keep_error_body(struct sink *s, const char *p, size_t len, long status) {
  if (status != s->errstatus) /* a redirect's body, then the answer's */
    s->errlen = 0, s->errstatus = status;
  size_t room = sizeof s->errbody - 1 - s->errlen;
  size_t take = len < room ? len : room;
  memcpy(s->errbody + s->errlen, p, take);
  s->errlen += take;
  s->errseen += len;
  return s->errseen > ERROR_BODY_MAX ? 0 : len;
}

/* len more bytes would pass a cap: the response's own (what the manifest
 * gives the blob, or what hutch takes for a manifest) or the pull's. */
static size_t over_cap(struct sink *s, size_t len) {
  bool own = s->got + len > s->limit;
  const char *cap;
  if (!own)
    cap = "the pull may take";
  else if (s->fd >= 0)
    cap = "the manifest gives the blob";
  else
    cap = "hutch takes for it";
  s->failed = true;
  hutch_err_fail(&s->fail, HUTCH_ERR_TOO_LARGE, "too_large",
                 "registry %s sent more than %s (%llu bytes)", s->r->ref.host, cap,
                 (unsigned long long)(own ? s->limit : s->r->opts.max_bytes));
  return 0;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg) {
  struct sink *s = arg;
  size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(s->r->h, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200)
    return keep_error_body(s, p, len, status);
  if (s->got + len > s->limit || s->r->used + len > s->r->opts.max_bytes)
    return over_cap(s, len);

  s->got += len;
  s->r->used += len;
  if (s->md)
    EVP_DigestUpdate(s->md, p, len);
  if (s->fd < 0) {
    s->buf = xrealloc(s->buf, s->len + len + 1);
    memcpy(s->buf + s->len, p, len);
    s->len += len;
    s->buf[s->len] = '\0';
  } else if (write_all(s->fd, p, len) < 0) {
    s->failed = true;
    hutch_err_set(&s->fail, errno, "writing a blob");
    return 0;
  }

  uint64_t now = now_ns();
  if (s->progress && s->got < s->limit && now - s->last_ns > 250000000ull) {
    s->last_ns = now;
    s->progress(s->arg, s->got, s->limit);
  }
  return len;
}

/* Every connection libcurl opens passes here, for the registry, its token
 * server and wherever they redirect: a registry answers with any URL it
 * likes (blobs often live elsewhere), so without this a registry on the
 * internet could make hutch GET from the host's own services (loopback),
 * the cloud's metadata service (169.254.169.254) or the private network,
 * and a name that resolves differently at each lookup could do the same.
 * The addresses are judged after resolution, as they are connected to,
 * so no name or redirect gets around it (registry_addr_allowed). */
static curl_socket_t open_guarded(void *arg, curlsocktype purpose, struct curl_sockaddr *a) {
  struct registry *r = arg;
  if (purpose != CURLSOCKTYPE_IPCXN || !registry_addr_allowed(r->scope, &a->addr)) {
    const void *in = a->family == AF_INET6
                         ? (const void *)&((struct sockaddr_in6 *)&a->addr)->sin6_addr
                         : (const void *)&((struct sockaddr_in *)&a->addr)->sin_addr;
    if (!inet_ntop(a->family, in, r->blocked, sizeof r->blocked))
      str_copy(r->blocked, sizeof r->blocked, "?");
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void set_common(struct registry *r, const char *url, struct sink *s, bool small) {
  CURL *h = r->h;
  curl_easy_reset(h);
  const char *proto = r->opts.insecure ? "http" : "https";
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, proto);
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, proto);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, MAX_REDIRECTS);

  /* No proxy from the environment: the guard judges the addresses the
   * pull reaches, which a proxy would hide. */
  curl_easy_setopt(h, CURLOPT_PROXY, "");
  curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_guarded);
  curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, r);

  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CONNECT_SECONDS);
  /* A registry that trickles bytes (or none) fails after
   * low_speed_seconds under 1 KiB/s instead of holding the pull open. */
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, r->opts.low_speed_seconds);
  if (small)
    curl_easy_setopt(h, CURLOPT_TIMEOUT, SMALL_REQUEST_SECONDS);

  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "hutch");
  r->errbuf[0] = '\0';
  r->blocked[0] = '\0';
}

static int transport_error(struct registry *r, CURLcode rc, struct hutch_err *err) {
  const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc);
  if (r->blocked[0])
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "forbidden_address",
                          "registry %s: refused to connect to %s (a %s registry may not lead "
                          "the pull there)",
                          r->ref.host, r->blocked, r->ref.loopback ? "loopback" : "non-loopback");
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return hutch_err_fail(err, HUTCH_ERR_UPSTREAM_TIMEOUT, "registry_timeout",
                          "registry %s: timed out: %s", r->ref.host, why);
  if (rc == CURLE_UNSUPPORTED_PROTOCOL)
    return hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_redirect",
                          "registry %s: redirected to a scheme other than %s", r->ref.host,
                          r->opts.insecure ? "http" : "https");
  if (rc == CURLE_TOO_MANY_REDIRECTS)
    return hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_redirect",
                          "registry %s: more than %ld redirects", r->ref.host, MAX_REDIRECTS);
  if ((rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION) && r->ref.loopback)
    return hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_tls",
                          "registry %s: no TLS (%s); a plain-http registry on loopback "
                          "needs --insecure",
                          r->ref.host, why);
  return hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_unreachable", "registry %s: %s",
                        r->ref.host, why);
}

/* A registry's error body is {"errors": [{"code", "message"}]}. */
static void error_detail(const struct sink *s, char *out, size_t size) {
  json_t *j = json_loadb(s->errbody, s->errlen, 0, NULL);
  json_t *e = json_array_get(json_object_get(j, "errors"), 0);
  const char *msg = json_string_value(json_object_get(e, "message"));
  if (!msg)
    msg = json_string_value(json_object_get(e, "code"));
  if (msg)
    printable(out, size, msg, strlen(msg));
  else
    out[0] = '\0';
  json_decref(j);
}

static int status_error(struct registry *r, long status, const struct sink *s, const char *what,
                        struct hutch_err *err) {
  char detail[200];
  error_detail(s, detail, sizeof detail);
  const char *sep = detail[0] ? ": " : "";
  if (status == 404)
    return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "not_found", "registry %s has no %s%s%s",
                          r->ref.host, what, sep, detail);
  if (status == 401)
    return hutch_err_fail(err, HUTCH_ERR_UNAUTHENTICATED, "registry_unauthorized",
                          "registry %s refused %s: not authorized%s%s", r->ref.host, what, sep,
                          detail);
  if (status == 403)
    return hutch_err_fail(err, HUTCH_ERR_FORBIDDEN, "registry_forbidden",
                          "registry %s refused %s: forbidden%s%s", r->ref.host, what, sep, detail);
  return hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_error",
                        "registry %s answered HTTP %ld for %s%s%s", r->ref.host, status, what, sep,
                        detail);
}

/* One request: 0 with *status, or -1 for what is no HTTP answer. */
static int perform(struct registry *r, struct sink *s, long *status, struct hutch_err *err) {
  CURLcode rc = curl_easy_perform(r->h);
  if (s->failed) {
    *err = s->fail;
    return -1;
  }
  curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, status);
  if (rc != CURLE_OK && !(*status != 200 && s->errseen > ERROR_BODY_MAX))
    return transport_error(r, rc, err);
  return 0;
}

/* The parameter key of a WWW-Authenticate challenge (key="value" or
 * key=value, split by commas), into out. */
static bool challenge_param(const char *c, const char *key, char *out, size_t size) {
  size_t klen = strlen(key);
  for (const char *p = c; (p = strstr(p, key)); p++) {
    if ((p != c && p[-1] != ' ' && p[-1] != ',') || p[klen] != '=')
      continue;
    p += klen + 1;
    bool quoted = *p == '"';
    p += quoted;
    size_t n = strcspn(p, quoted ? "\"" : ", ");
    if (n >= size)
      return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
  }
  return false;
}

/* A token goes into a header: visible ASCII only, so a registry cannot
 * add headers of its own to the requests that carry it. */
static bool token_ok(const char *t) {
  size_t n = strlen(t);
  if (n == 0 || n > 16384)
    return false;
  for (size_t i = 0; i < n; i++)
    if (t[i] <= 0x20 || t[i] >= 0x7f)
      return false;
  return true;
}

/* The token server's URL a Bearer challenge gives (malloc'd), or NULL
 * with err set. */
static char *token_url(struct registry *r, const char *challenge, struct hutch_err *err) {
  char realm[1024], service[256] = "", scope[512];
  if (!challenge_param(challenge, "realm", realm, sizeof realm)) {
    hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_auth",
                   "registry %s asked for a token without a realm", r->ref.host);
    return NULL;
  }
  challenge_param(challenge, "service", service, sizeof service);
  if (!challenge_param(challenge, "scope", scope, sizeof scope))
    snprintf(scope, sizeof scope, "repository:%s:pull", r->ref.name);

  char *esc_service = curl_easy_escape(r->h, service, 0);
  char *esc_scope = curl_easy_escape(r->h, scope, 0);
  char *url = xasprintf("%s%cservice=%s&scope=%s", realm, strchr(realm, '?') ? '&' : '?',
                        esc_service, esc_scope);
  curl_free(esc_service);
  curl_free(esc_scope);
  return url;
}

/* The token a token server's answer (body, len bytes) holds, kept as
 * r->bearer. */
static int take_token(struct registry *r, const char *body, size_t len, struct hutch_err *err) {
  json_t *j = json_loadb(body, len, 0, NULL);
  const char *tok = json_string_value(json_object_get(j, "token"));
  if (!tok)
    tok = json_string_value(json_object_get(j, "access_token"));
  if (!tok || !token_ok(tok)) {
    json_decref(j);
    return hutch_err_fail(err, HUTCH_ERR_UPSTREAM, "registry_auth",
                          "registry %s: its token server gave no usable token", r->ref.host);
  }
  free(r->bearer);
  r->bearer = xasprintf("Authorization: Bearer %s", tok);
  json_decref(j);
  return 0;
}

static int get_token(struct registry *r, const char *challenge, struct hutch_err *err) {
  char *url = token_url(r, challenge, err);
  if (!url)
    return -1;
  struct sink s = {.r = r, .fd = -1, .limit = TOKEN_MAX};
  set_common(r, url, &s, true);
  free(url);
  /* The credentials go to the token server the registry names, as Docker
   * sends them; never over plain http unless it is on loopback
   * (insecure is loopback only, and so is its guard). */
  if (r->opts.user) {
    curl_easy_setopt(r->h, CURLOPT_USERPWD, r->opts.user);
    curl_easy_setopt(r->h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
  }

  long status = 0;
  if (perform(r, &s, &status, err) < 0) {
    free(s.buf);
    return hutch_err_wrap(err, "getting a token");
  }
  if (status != 200) {
    free(s.buf);
    return status_error(r, status, &s, "a token", err);
  }
  int rc = take_token(r, s.buf ? s.buf : "", s.len, err);
  free(s.buf);
  return rc;
}

/* After a 401: take the registry's challenge (Bearer: a token; Basic: the
 * credentials). -1 when there is none to answer. */
static int authenticate(struct registry *r, struct hutch_err *err) {
  struct curl_header *hd = NULL;
  if (curl_easy_header(r->h, "WWW-Authenticate", 0, CURLH_HEADER, -1, &hd) != CURLHE_OK)
    return hutch_err_fail(err, HUTCH_ERR_UNAUTHENTICATED, "registry_unauthorized",
                          "registry %s refused the pull: not authorized", r->ref.host);
  char challenge[2048];
  str_copy(challenge, sizeof challenge, hd->value);
  if (strncasecmp(challenge, "Bearer ", 7) == 0)
    return get_token(r, challenge + 7, err);
  if (strncasecmp(challenge, "Basic", 5) == 0 && r->opts.user && !r->basic) {
    r->basic = true;
    return 0;
  }
  return hutch_err_fail(err, HUTCH_ERR_UNAUTHENTICATED, "registry_unauthorized",
                        "registry %s refused the pull: not authorized%s", r->ref.host,
                        r->opts.user ? "" : " (credentials: --user or HUTCH_REGISTRY_AUTH)");
}

/* One request of get(): url into s, with the Accept header and the
 * credentials got so far; the answer's status in *status. */
static int get_once(struct registry *r, const char *url, const char *accept, struct sink *s,
                    long *status, struct hutch_err *err) {
  set_common(r, url, s, s->fd < 0);
  struct curl_slist *hdrs = NULL;
  if (accept)
    hdrs = curl_slist_append(hdrs, accept);
  if (r->bearer)
    hdrs = curl_slist_append(hdrs, r->bearer);
  curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdrs);
  if (r->basic) {
    curl_easy_setopt(r->h, CURLOPT_USERPWD, r->opts.user);
    curl_easy_setopt(r->h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
  }

  int p = perform(r, s, status, err);
  curl_slist_free_all(hdrs);
  return p;
}

/* GET path on the registry into s, answering one auth challenge. */
static int get(struct registry *r, const char *path, const char *accept, struct sink *s,
               const char *what, struct hutch_err *err) {
  char *url = xasprintf("%s://%s/v2/%s/%s", r->opts.insecure ? "http" : "https", r->ref.host,
                        r->ref.name, path);
  int rc = -1;
  for (int attempt = 0;; attempt++) {
    long status = 0;
    if (get_once(r, url, accept, s, &status, err) < 0)
      break;
    if (status == 200) {
      rc = 0;
      break;
    }
    if (status != 401 || attempt > 0) {
      status_error(r, status, s, what, err);
      break;
    }
    if (authenticate(r, err) < 0)
      break;
    s->errlen = s->errseen = 0;
  }
  free(url);
  return rc;
}

/* Where a pull from ref may connect (registry_addr_allowed). */
static enum registry_scope scope_of(const struct registry_ref *ref,
                                    const struct registry_opts *opts) {
  if (ref->loopback)
    return REGISTRY_SCOPE_LOOPBACK;
  if (opts->allow_private)
    return REGISTRY_SCOPE_PRIVATE;
  return REGISTRY_SCOPE_PUBLIC;
}

struct registry *registry_open(const struct registry_ref *ref, const struct registry_opts *opts,
                               struct hutch_err *err) {
  if (opts->insecure && !ref->loopback) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "insecure_not_loopback",
                   "--insecure (plain http) is only for a registry on loopback "
                   "(localhost, 127.0.0.0/8, [::1]), not %s",
                   ref->host);
    return NULL;
  }

  struct registry *r = xcalloc(1, sizeof *r);
  r->ref = *ref;
  r->opts = *opts;
  r->scope = scope_of(ref, opts);
  r->h = curl_easy_init();
  if (!r->h) {
    free(r);
    hutch_err_fail(err, HUTCH_ERR_SYSTEM, NULL, "libcurl would not start");
    return NULL;
  }
  return r;
}

void registry_close(struct registry *r) {
  if (!r)
    return;
  curl_easy_cleanup(r->h);
  free(r->bearer);
  free(r);
}

static void digest_of(EVP_MD_CTX *md, char out[72]) {
  memcpy(out, "sha256:", 7);
  digest_sha256_final_hex(md, out + 7);
}

static int digest_mismatch(struct registry *r, const char *what, const char *want, const char *got,
                           struct hutch_err *err) {
  return hutch_err_fail(err, HUTCH_ERR_INVALID, "digest_mismatch",
                        "registry %s: %s has digest %s, not %s", r->ref.host, what, got, want);
}

static bool is_index(const char *media) {
  return strcmp(media, OCI_INDEX) == 0 || strcmp(media, MEDIA_DOCKER_LIST) == 0;
}

/* The manifest's media type: the response's Content-Type when it is one
 * of the four, else the document's own mediaType field. */
static void manifest_media(struct registry *r, json_t *m, char *out, size_t size) {
  static const char *const known[] = {OCI_INDEX, OCI_MANIFEST, MEDIA_DOCKER_LIST,
                                      MEDIA_DOCKER_MANIFEST};
  struct curl_header *hd = NULL;
  if (curl_easy_header(r->h, "Content-Type", 0, CURLH_HEADER, -1, &hd) == CURLHE_OK) {
    size_t n = strcspn(hd->value, "; ");
    for (size_t i = 0; i < ARRAY_SIZE(known); i++)
      if (strlen(known[i]) == n && strncmp(hd->value, known[i], n) == 0) {
        str_copy(out, size, known[i]);
        return;
      }
  }
  const char *field = json_string_value(json_object_get(m, "mediaType"));
  if (field)
    printable(out, size, field, strlen(field));
  else
    str_copy(out, size, json_object_get(m, "manifests") ? OCI_INDEX : OCI_MANIFEST);
}

/* The manifest document s got, checked to be one of schema 2. */
static json_t *parse_manifest(struct registry *r, const struct sink *s, const char *what,
                              struct hutch_err *err) {
  json_t *m = json_loadb(s->buf ? s->buf : "", s->len, 0, NULL);
  if (!json_is_object(m) || json_integer_value(json_object_get(m, "schemaVersion")) != 2) {
    hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_manifest",
                   "registry %s: %s is no schema 2 manifest (JSON object)", r->ref.host, what);
    json_decref(m);
    return NULL;
  }
  return m;
}

/* GET manifests/<reference>; want: the digest it must have, or NULL. */
static json_t *fetch_manifest(struct registry *r, const char *reference, const char *want,
                              struct registry_manifest *out, struct hutch_err *err) {
  static const char accept[] =
      "Accept: " OCI_INDEX ", " OCI_MANIFEST ", " MEDIA_DOCKER_LIST ", " MEDIA_DOCKER_MANIFEST;
  struct sink s = {.r = r, .fd = -1, .limit = MANIFEST_MAX, .md = EVP_MD_CTX_new()};
  if (!s.md)
    abort();
  EVP_DigestInit_ex(s.md, EVP_sha256(), NULL);

  char *path = xasprintf("manifests/%s", reference);
  char what[400];
  snprintf(what, sizeof what, "manifest %s%c%s", r->ref.name, strchr(reference, ':') ? '@' : ':',
           reference);
  int rc = get(r, path, accept, &s, what, err);
  free(path);
  memset(out, 0, sizeof *out);
  if (rc == 0) {
    digest_of(s.md, out->digest);
    if (want && strcmp(want, out->digest) != 0)
      rc = digest_mismatch(r, what, want, out->digest, err);
  }
  EVP_MD_CTX_free(s.md);

  json_t *m = NULL;
  if (rc == 0)
    m = parse_manifest(r, &s, what, err);
  if (!m) {
    free(s.buf);
    return NULL;
  }
  manifest_media(r, m, out->media, sizeof out->media);
  out->body = s.buf;
  out->len = s.len;
  return m;
}

/* The digest of the linux/amd64 manifest an index lists. */
static int pick_platform(struct registry *r, json_t *index, char out[72], struct hutch_err *err) {
  json_t *list = json_object_get(index, "manifests");
  if (!json_is_array(list))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_manifest",
                          "registry %s: the index of %s has no manifests list", r->ref.host,
                          r->ref.canonical);
  size_t i;
  json_t *d;
  json_array_foreach(list, i, d) {
    json_t *plat = json_object_get(d, "platform");
    const char *os = json_string_value(json_object_get(plat, "os"));
    const char *arch = json_string_value(json_object_get(plat, "architecture"));
    const char *digest = json_string_value(json_object_get(d, "digest"));
    if (os && arch && digest && strcmp(os, "linux") == 0 && strcmp(arch, "amd64") == 0) {
      char hex[65];
      if (!unpack_digest_hex(digest, hex))
        break;
      str_copy(out, 72, digest);
      return 0;
    }
  }
  return hutch_err_fail(err, HUTCH_ERR_NOT_FOUND, "no_platform",
                        "registry %s: %s has no linux/amd64 image", r->ref.host, r->ref.canonical);
}

json_t *registry_get_manifest(struct registry *r, struct registry_manifest *out,
                              struct hutch_err *err) {
  const char *want = r->ref.digest[0] ? r->ref.digest : NULL;
  json_t *m = fetch_manifest(r, want ? want : r->ref.tag, want, out, err);
  if (m && is_index(out->media)) {
    char child[72];
    int rc = pick_platform(r, m, child, err);
    json_decref(m);
    free(out->body);
    out->body = NULL;
    m = NULL;
    if (rc == 0)
      m = fetch_manifest(r, child, child, out, err);
  }

  if (m &&
      (strcmp(out->media, OCI_MANIFEST) != 0 && strcmp(out->media, MEDIA_DOCKER_MANIFEST) != 0)) {
    hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "bad_manifest",
                   "registry %s: %s is a '%s', not an OCI or Docker v2 image manifest", r->ref.host,
                   r->ref.canonical, out->media);
    json_decref(m);
    free(out->body);
    out->body = NULL;
    return NULL;
  }
  return m;
}

int registry_get_blob(struct registry *r, const char *digest, uint64_t size, int fd,
                      registry_progress_fn progress, void *arg, struct hutch_err *err) {
  char hex[65];
  if (!unpack_digest_hex(digest, hex))
    return hutch_err_fail(err, HUTCH_ERR_INVALID, "bad_manifest",
                          "registry %s: '%.80s' is no sha256 digest", r->ref.host, digest);
  struct sink s = {.r = r,
                   .fd = fd,
                   .limit = size,
                   .md = EVP_MD_CTX_new(),
                   .progress = progress,
                   .arg = arg,
                   .last_ns = now_ns()};
  if (!s.md)
    abort();
  EVP_DigestInit_ex(s.md, EVP_sha256(), NULL);

  char *path = xasprintf("blobs/%s", digest);
  char what[120];
  snprintf(what, sizeof what, "blob %.19s", digest);
  int rc = get(r, path, NULL, &s, what, err);
  free(path);
  char got[72];
  digest_of(s.md, got);
  EVP_MD_CTX_free(s.md);

  if (rc == 0 && s.got != size)
    rc = hutch_err_fail(err, HUTCH_ERR_INVALID, "size_mismatch",
                        "registry %s: %s has %llu bytes, not %llu", r->ref.host, what,
                        (unsigned long long)s.got, (unsigned long long)size);
  if (rc == 0 && strcmp(got, digest) != 0)
    rc = digest_mismatch(r, what, digest, got, err);
  if (rc == 0 && progress)
    progress(arg, s.got, size);
  return rc;
}
