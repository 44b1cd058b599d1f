/* The input-schema checker (schema.h). */
#include "schema.h"

#include <stdio.h>
#include <string.h>

static const char *type_of(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  default:
    return "null";
  }
}

static bool is_type(const char *t, const json_t *v) {
  if (strcmp(t, "object") == 0)
    return json_is_object(v);
  if (strcmp(t, "array") == 0)
    return json_is_array(v);
  if (strcmp(t, "string") == 0)
    return json_is_string(v);
  if (strcmp(t, "integer") == 0)
    return json_is_integer(v) ||
           (json_is_real(v) && json_real_value(v) == (json_int_t)json_real_value(v));
  if (strcmp(t, "number") == 0)
    return json_is_number(v);
  if (strcmp(t, "boolean") == 0)
    return json_is_boolean(v);
  if (strcmp(t, "null") == 0)
    return json_is_null(v);
  return false;
}

static bool fail(char *why, size_t n, const char *at, const char *what) {
  snprintf(why, n, "%s: %s", at, what);
  return false;
}

static bool check(const json_t *schema, const json_t *v, const char *at, char *why, size_t n);

static bool check_type(const json_t *schema, const json_t *v, const char *at, char *why, size_t n) {
  const json_t *t = json_object_get(schema, "type");
  if (!t)
    return true;
  char want[128] = "";
  if (json_is_string(t)) {
    if (is_type(json_string_value(t), v))
      return true;
    snprintf(want, sizeof want, "%s", json_string_value(t));
  } else {
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e) {
      if (is_type(json_string_value(e), v))
        return true;
      size_t len = strlen(want);
      snprintf(want + len, sizeof want - len, "%s%s", i ? " or " : "", json_string_value(e));
    }
  }
  char what[256];
  snprintf(what, sizeof what, "must be %s, not %s", want, type_of(v));
  return fail(why, n, at, what);
}

static bool check_object(const json_t *schema, const json_t *v, const char *at, char *why,
                         size_t n) {
  const json_t *props = json_object_get(schema, "properties");
  const json_t *extra = json_object_get(schema, "additionalProperties");
  const char *key;
  const json_t *val;
  char sub[256];
  json_object_foreach((json_t *)v, key, val) {
    snprintf(sub, sizeof sub, "%s.%.64s", at, key);
    const json_t *ps = json_object_get(props, key);
    if (ps) {
      if (!check(ps, val, sub, why, n))
        return false;
    } else if (json_is_false(extra)) {
      char what[256];
      snprintf(what, sizeof what, "unknown field '%.64s' (the schema names: ", key);
      const char *k;
      const json_t *unused;
      size_t i = 0;
      json_object_foreach((json_t *)props, k, unused) {
        size_t len = strlen(what);
        snprintf(what + len, sizeof what - len, "%s%s", i++ ? ", " : "", k);
      }
      size_t len = strlen(what);
      snprintf(what + len, sizeof what - len, ")");
      return fail(why, n, at, what);
    } else if (json_is_object(extra) && !check(extra, val, sub, why, n)) {
      return false;
    }
  }
  size_t i;
  const json_t *req;
  json_array_foreach(json_object_get(schema, "required"), i, req) {
    if (!json_object_get(v, json_string_value(req))) {
      char what[128];
      snprintf(what, sizeof what, "'%s' is required", json_string_value(req));
      return fail(why, n, at, what);
    }
  }
  return true;
}

static bool check(const json_t *schema, const json_t *v, const char *at, char *why, size_t n) {
  if (!check_type(schema, v, at, why, n))
    return false;
  char what[256];

  const json_t *en = json_object_get(schema, "enum");
  if (en) {
    size_t i;
    const json_t *e;
    bool found = false;
    json_array_foreach(en, i, e)
      found = found || json_equal((json_t *)e, (json_t *)v);
    if (!found) {
      char *list = json_dumps(en, JSON_COMPACT);
      snprintf(what, sizeof what, "must be one of %s", list ? list : "the enum");
      free(list);
      return fail(why, n, at, what);
    }
  }

  if (json_is_string(v)) {
    /* JSON Schema counts characters, not bytes: UTF-8's continuation
     * bytes are not counted. */
    size_t len = 0;
    const unsigned char *p = (const unsigned char *)json_string_value(v);
    for (size_t i = 0; i < json_string_length(v); i++)
      len += (p[i] & 0xC0) != 0x80;
    const json_t *mx = json_object_get(schema, "maxLength");
    const json_t *mn = json_object_get(schema, "minLength");
    if (mx && len > (size_t)json_integer_value(mx)) {
      snprintf(what, sizeof what, "at most %lld characters, not %zu", json_integer_value(mx), len);
      return fail(why, n, at, what);
    }
    if (mn && len < (size_t)json_integer_value(mn)) {
      snprintf(what, sizeof what, "at least %lld characters", json_integer_value(mn));
      return fail(why, n, at, what);
    }
  }

  if (json_is_number(v)) {
    double d = json_number_value(v);
    const json_t *mx = json_object_get(schema, "maximum");
    const json_t *mn = json_object_get(schema, "minimum");
    if (mx && d > json_number_value(mx)) {
      snprintf(what, sizeof what, "at most %g", json_number_value(mx));
      return fail(why, n, at, what);
    }
    if (mn && d < json_number_value(mn)) {
      snprintf(what, sizeof what, "at least %g", json_number_value(mn));
      return fail(why, n, at, what);
    }
  }

  if (json_is_array(v)) {
    const json_t *mx = json_object_get(schema, "maxItems");
    const json_t *mn = json_object_get(schema, "minItems");
    if (mx && json_array_size(v) > (size_t)json_integer_value(mx)) {
      snprintf(what, sizeof what, "at most %lld items", json_integer_value(mx));
      return fail(why, n, at, what);
    }
    if (mn && json_array_size(v) < (size_t)json_integer_value(mn)) {
      snprintf(what, sizeof what, "at least %lld items", json_integer_value(mn));
      return fail(why, n, at, what);
    }
    const json_t *items = json_object_get(schema, "items");
    size_t i;
    const json_t *e;
    char sub[256];
    json_array_foreach(v, i, e) {
      snprintf(sub, sizeof sub, "%s[%zu]", at, i);
      if (items && !check(items, e, sub, why, n))
        return false;
    }
  }

  if (json_is_object(v))
    return check_object(schema, v, at, why, n);
  return true;
}

static bool wants_integer(const json_t *schema) {
  const json_t *t = json_object_get(schema, "type");
  if (json_is_string(t))
    return strcmp(json_string_value(t), "integer") == 0;
  size_t i;
  const json_t *e;
  json_array_foreach(t, i, e)
    if (json_is_string(e) && strcmp(json_string_value(e), "integer") == 0)
      return true;
  return false;
}

void mcp_schema_integers(const json_t *schema, json_t *v) {
  const json_t *props = json_object_get(schema, "properties");
  const json_t *extra = json_object_get(schema, "additionalProperties");
  const json_t *items = json_object_get(schema, "items");
  if (json_is_object(v)) {
    const char *key;
    json_t *val;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, val) {
      const json_t *ps = json_object_get(props, key);
      if (!ps && json_is_object(extra))
        ps = extra;
      if (!ps)
        continue;
      if (json_is_real(val) && wants_integer(ps))
        json_object_set_new(v, key, json_integer((json_int_t)json_real_value(val)));
      else
        mcp_schema_integers(ps, val);
    }
  } else if (json_is_array(v) && items) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (json_is_real(e) && wants_integer(items))
        json_array_set_new(v, i, json_integer((json_int_t)json_real_value(e)));
      else
        mcp_schema_integers(items, e);
    }
  }
}

bool mcp_schema_check(const json_t *schema, const json_t *v, char *why, size_t n) {
  return check(schema, v, "arguments", why, n);
}
