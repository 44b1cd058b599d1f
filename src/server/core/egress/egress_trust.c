/* A sandbox trusts its egress CA (egress_tls.h): the CA's certificate,
 * never its key, is written into the sandbox by a shell run as its root,
 * appended to the system bundle (where the template lets it be written)
 * and to a copy of it, /etc/hutch/ca-bundle.crt, named by the variables
 * TLS clients read: SSL_CERT_FILE (OpenSSL, Python's ssl),
 * REQUESTS_CA_BUNDLE (requests, pip), CURL_CA_BUNDLE (curl); and the CA
 * alone by NODE_EXTRA_CA_CERTS (Node). The variables are set only
 * once the files are there, so that a sandbox whose files could not be
 * written (no shell, a read-only /etc) keeps the trust it had. */
#include "core/egress/egress_trust.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/run/exec.h"
#include "core/sandbox/sbx.h"
#include "core/base/server.h"
#include "core/egress/egress_ca.h"

#define TRUST_DIR "/etc/hutch"
#define TRUST_TIMEOUT_MS 20000

struct trust {
  struct server *srv;
  struct principal p;
  char id[17];
  trust_done_fn done;
  void *arg;
  char out[512]; /* what the shell said on stderr */
  size_t nout;
};

static const char script[] =
    "set -e\n"
    "umask 022\n"
    "mkdir -p " TRUST_DIR "\n"
    "cat > " TRUST_DIR "/egress-ca.crt.new <<'HUTCH_EGRESS_CA'\n"
    "%s"
    "HUTCH_EGRESS_CA\n"
    "mv " TRUST_DIR "/egress-ca.crt.new " TRUST_DIR "/egress-ca.crt\n"
    "sys=\n"
    "for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt "
    "/etc/ssl/cert.pem; do\n"
    "  if [ -f \"$f\" ]; then sys=$f; break; fi\n"
    "done\n"
    "if [ -n \"$sys\" ] && cat " TRUST_DIR "/egress-ca.crt 2>/dev/null >> \"$sys\"; then\n"
    "  cat \"$sys\" > " TRUST_DIR "/ca-bundle.crt\n"
    "elif [ -n \"$sys\" ]; then\n"
    "  cat \"$sys\" " TRUST_DIR "/egress-ca.crt > " TRUST_DIR "/ca-bundle.crt\n"
    "else\n"
    "  cat " TRUST_DIR "/egress-ca.crt > " TRUST_DIR "/ca-bundle.crt\n"
    "fi\n";

static void set_default(json_t *env, const char *name, const char *value) {
  if (!json_object_get(env, name))
    json_object_set_new(env, name, json_string(value));
}

/* A CA the sandbox does not trust is no use: its hosts' CONNECTs stay
 * tunnels, and the next one tries again (a sandbox paused meanwhile, say). */
static void forget_ca(struct sbx *sb) {
  egress_ca_free(sb->tls_ca);
  sb->tls_ca = NULL;
  sb->tls_trusted = false;
}

static void trust_start(json_t *pid, void *arg) {
  (void)pid, (void)arg;
}

static bool trust_output(int which, const uint8_t *data, size_t n, void *arg) {
  struct trust *t = arg;
  if (which == 1) {
    size_t room = sizeof t->out - 1 - t->nout;
    memcpy(t->out + t->nout, data, n < room ? n : room);
    t->nout += n < room ? n : room;
    t->out[t->nout] = '\0';
  }
  return true;
}

static void trust_end(json_t *exit, void *arg) {
  struct trust *t = arg;
  const char *status = json_string_value(json_object_get(exit, "status"));
  json_int_t code = json_integer_value(json_object_get(exit, "exit_code"));
  struct sbx *sb = sbx_find_own(t->srv, &t->p, t->id);
  struct hutch_err err = {0};

  if (!sb)
    hutch_err_fail(&err, HUTCH_ERR_UNAVAILABLE, "sandbox_error", "the sandbox ended");
  else if (!status || strcmp(status, "ok") != 0 || code != 0) {
    hutch_err_fail(&err, HUTCH_ERR_SYSTEM, "internal",
                   "installing the egress CA in sandbox %s failed (%s, exit code %lld): %s", t->id,
                   status ? status : "?", (long long)code, t->out);
    forget_ca(sb);
  } else {
    sb->tls_trusted = true;
    set_default(sb->env, "SSL_CERT_FILE", TRUST_DIR "/ca-bundle.crt");
    set_default(sb->env, "REQUESTS_CA_BUNDLE", TRUST_DIR "/ca-bundle.crt");
    set_default(sb->env, "CURL_CA_BUNDLE", TRUST_DIR "/ca-bundle.crt");
    set_default(sb->env, "NODE_EXTRA_CA_CERTS", TRUST_DIR "/egress-ca.crt");
  }
  json_decref(exit);

  if (t->done)
    t->done(err.msg[0] ? &err : NULL, t->arg);
  else if (err.msg[0])
    fprintf(stderr, "hutch serve: %s\n", err.msg);

  free(t);
}

static const struct exec_sink trust_sink = {
    .start = trust_start, .output = trust_output, .end = trust_end};

int egress_trust(struct sbx *sb, trust_done_fn done, void *arg) {
  if (!json_array_size(sb->secrets) || sb->tls_ca)
    return 0;

  struct hutch_err err = {0};
  sb->tls_ca = egress_ca_new(sb->id, &err);
  if (!sb->tls_ca) {
    fprintf(stderr, "hutch serve: %s\n", err.msg);
    return 0;
  }

  struct trust *t = xcalloc(1, sizeof *t);
  t->srv = sb->srv;
  str_copy(t->p.tenant, sizeof t->p.tenant, sb->tenant);
  str_copy(t->id, sizeof t->id, sb->id);
  t->done = done;
  t->arg = arg;

  char *cmd = xasprintf(script, egress_ca_pem(sb->tls_ca));
  json_t *req = json_pack("{s:s,s:[s,s,s],s:{s:s},s:s,s:b,s:I}", "op", "exec", "argv", "/bin/sh",
                          "-c", cmd, "env", "PATH", "/usr/sbin:/usr/bin:/sbin:/bin", "user", "root",
                          "stdin", 0, "timeout_ms", (json_int_t)TRUST_TIMEOUT_MS);
  free(cmd);

  struct exec_sink sink = trust_sink;
  sink.arg = t;
  struct exec *x = exec_start(sb, req, NULL, now_ns(), &sink, &err);
  json_decref(req);
  if (!x) {
    fprintf(stderr, "hutch serve: sandbox %s: installing its egress CA: %s\n", sb->id, err.msg);
    forget_ca(sb);
    free(t);
    return 0;
  }
  return 1;
}
