/* Request bodies: JSON parsed by jansson, fields checked for type and
 * range, every refusal a 400 that names the field; and http_json_text,
 * any text as a JSON string. */
#include "http/body.h"

#include <math.h>
#include <string.h>

#include "http/errors.h"
#include "http/http.h"

json_t *http_json_text(const char *s) {
  json_t *j = json_string(s);
  if (j)
    return j;
  /* Not UTF-8: keep what is ASCII, mark the rest. */
  char buf[1024];
  size_t i = 0;
  for (; s[i] && i + 1 < sizeof buf; i++)
    buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
  buf[i] = '\0';
  return json_string(buf);
}

json_t *http_body_object(struct http_conn *c) {
  const struct http_req *r = &c->req;
  if (r->body_len == 0)
    return json_object(); /* no body: every field takes its default */
  json_error_t e;
  json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e);
  if (!j) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_json",
               "request body is not valid JSON: %s (at byte %d)", e.text, e.position);
    return NULL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    http_error(c, HUTCH_ERR_INVALID, "invalid_json", "request body must be a JSON object");
    return NULL;
  }
  return j;
}

int http_body_uint(struct http_conn *c, json_t *o, const char *key, uint64_t min, uint64_t max,
                   uint64_t *out) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
      (uint64_t)json_integer_value(v) > max) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "%s must be an integer from %llu to %llu",
               key, (unsigned long long)min, (unsigned long long)max);
    return -1;
  }
  *out = (uint64_t)json_integer_value(v);
  return 1;
}

int http_body_number(struct http_conn *c, json_t *o, const char *key, double min, double max,
                     double *out) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return 0;
  double d = json_number_value(v);
  if (!json_is_number(v) || !isfinite(d) || d < min || d > max) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "%s must be a number from %g to %g", key,
               min, max);
    return -1;
  }
  *out = d;
  return 1;
}

int http_body_string(struct http_conn *c, json_t *o, const char *key, size_t max,
                     const char **out) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_string(v) || json_string_length(v) > max ||
      strlen(json_string_value(v)) != json_string_length(v)) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "%s must be a string of at most %zu bytes, without NUL", key, max);
    return -1;
  }
  *out = json_string_value(v);
  return 1;
}

int http_body_string_map(struct http_conn *c, json_t *o, const char *key, size_t max_entries,
                         json_t **out) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v))
    return 0;
  if (!json_is_object(v) || json_object_size(v) > max_entries) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
               "%s must be an object of at most %zu strings", key, max_entries);
    return -1;
  }
  const char *k;
  json_t *val;
  json_object_foreach(v, k, val) {
    if (!json_is_string(val) || !*k || strlen(json_string_value(val)) != json_string_length(val)) {
      http_error(c, HUTCH_ERR_INVALID, "invalid_argument",
                 "%s: every value must be a string (key '%s')", key, k);
      return -1;
    }
  }
  *out = v;
  return 1;
}

const char *http_body_unknown(json_t *o, const char *const *known) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    size_t i = 0;
    while (known[i] && strcmp(known[i], k) != 0)
      i++;
    if (!known[i])
      return k;
  }
  return NULL;
}

int http_body_only(struct http_conn *c, json_t *o, const char *const *known) {
  const char *k = http_body_unknown(o, known);
  if (k) {
    http_error(c, HUTCH_ERR_INVALID, "invalid_argument", "unknown field '%s'", k);
    return -1;
  }
  return 0;
}
