/* hutch-ctl's calls of the native API (ctl.h): the client set up once,
 * and every failure turned into one line on stderr and an exit code. */
#include "ctl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int setup(struct ctl *ctl) {
  if (ctl->ready)
    return 0;
  char why[512];
  int rc = hc_client_setup(&ctl->client, ctl->url, ctl->key, why, sizeof why);
  if (rc != HC_SETUP_OK)
    return ctl_fail(ctl, rc == HC_SETUP_NO_KEY ? CTL_EXIT_DENIED : CTL_EXIT_FAILED, "%s", why);
  hc_init();
  ctl->ready = true;
  return 0;
}

/* The exit code of an answer (or of none), its error said. */
static int judged(struct ctl *ctl, bool answered, const struct hc_answer *a) {
  if (!answered && a->unreachable)
    return ctl_fail(ctl, CTL_EXIT_UNREACHABLE, "no server at %s (%s): start one with hutch serve",
                    ctl->client.url, a->unreachable);
  /* A connection made and then lost (the server ended mid-answer) is no
   * "no server": hutch failed with what it was doing. */
  if (!answered)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "%s", a->message);
  if (a->status < 400)
    return 0;
  return ctl_refused(ctl, a->status, a->code, a->message);
}

int ctl_refused(struct ctl *ctl, long status, const char *code, const char *message) {
  int rc = CTL_EXIT_FAILED;
  if (status == 401 || status == 403)
    rc = CTL_EXIT_DENIED;
  else if (status == 404)
    rc = CTL_EXIT_NOT_FOUND;
  return ctl_fail(ctl, rc, "%s: %s", code, message);
}

int ctl_call(struct ctl *ctl, const struct hc_req *req, struct hc_answer *a) {
  memset(a, 0, sizeof *a);
  int rc = setup(ctl);
  if (rc)
    return rc;
  bool answered = hc_call(&ctl->client, req, a);
  return judged(ctl, answered, a);
}

int ctl_api(struct ctl *ctl, const char *method, const char *path, json_t *body, json_t **out) {
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  struct hc_req req = {
      .method = method, .path = path, .body = text, .body_len = text ? strlen(text) : 0};
  struct hc_answer a;
  int rc = ctl_call(ctl, &req, &a);
  free(text);

  if (out) {
    *out = rc == 0 ? a.json : NULL;
    if (*out)
      a.json = NULL;
  }
  hc_answer_free(&a);
  return rc;
}

int ctl_stream(struct ctl *ctl, const char *method, const char *path, json_t *body,
               int (*line)(void *arg, json_t *obj), void *arg) {
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  struct hc_req req = {.method = method,
                       .path = path,
                       .body = text,
                       .body_len = text ? strlen(text) : 0,
                       .line = line,
                       .arg = arg};
  struct hc_answer a;
  int rc = ctl_call(ctl, &req, &a);
  free(text);
  hc_answer_free(&a);
  return rc;
}

char *ctl_path(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = NULL;
  const char *p = fmt;
  for (const char *s; (s = strstr(p, "%s")) != NULL; p = s + 2) {
    str_append(&out, p, (size_t)(s - p));
    char *e = hc_escape(va_arg(ap, const char *));
    str_append(&out, e, strlen(e));
    free(e);
  }
  str_append(&out, p, strlen(p));
  va_end(ap);
  return out;
}

int ctl_list(struct ctl *ctl, const char *path, const char *field, bool as_json,
             const struct ctl_columns *cols) {
  json_t *answer;
  int rc = ctl_api(ctl, "GET", path, NULL, &answer);
  if (rc)
    return rc;
  json_t *list = json_object_get(answer, field), *item;
  if (as_json) {
    ctl_print_json(list);
  } else {
    struct ctl_table *t = ctl_table_new(cols->n, cols->head);
    size_t i;
    json_array_foreach(list, i, item)
      cols->row(item, t);
    ctl_table_print(ctl, t);
  }
  json_decref(answer);
  return 0;
}

int ctl_each(struct ctl *ctl, const char *method, const char *fmt, int argc, char **argv) {
  int rc = 0;
  for (int i = optind; i < argc; i++) {
    char *path = ctl_path(fmt, argv[i]);
    int one = ctl_api(ctl, method, path, NULL, NULL);
    free(path);
    if (one == 0)
      printf("%s\n", argv[i]);
    else
      rc = one;
  }
  return rc;
}
