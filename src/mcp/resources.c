/* MCP resources (resources.h). */
#include "resources.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"
#include "util.h"

#define PREFIX "hutch://sandboxes/"

static bool failed(const struct hc_answer *a, bool *is_error, char *why, size_t n) {
  if (a->status && a->status < 300)
    return false;
  *is_error = true;
  snprintf(why, n, "%s%s%s", a->code[0] ? a->code : "", a->code[0] ? ": " : "", a->message);
  return true;
}

json_t *mcp_resources_list(struct mcp_session *s, bool *is_error, char *why, size_t n) {
  struct hc_req call = {.method = "GET", .path = "/v1/sandboxes", .timeout_ms = 30000};
  struct hc_answer a;
  json_t *res = NULL;
  if (!hc_call(&s->native, &call, &a) || failed(&a, is_error, why, n))
    goto out;
  json_t *list = json_array();
  size_t i;
  json_t *sb;
  json_array_foreach(json_object_get(a.json, "sandboxes"), i, sb) {
    const char *id = json_string_value(json_object_get(sb, "id"));
    const char *tmpl = json_string_value(json_object_get(sb, "template"));
    const char *state = json_string_value(json_object_get(sb, "state"));
    if (!id)
      continue;
    char uri[128], desc[256];
    snprintf(uri, sizeof uri, PREFIX "%s", id);
    snprintf(desc, sizeof desc, "a sandbox of template %s, %s", tmpl ? tmpl : "?",
             state ? state : "?");
    json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s}", "uri", uri, "name", id,
                                          "description", desc, "mimeType", "application/json"));
  }
  res = json_pack("{s:o}", "resources", list);
out:
  if (!res && !*is_error) {
    *is_error = true;
    snprintf(why, n, "%s", a.message);
  }
  hc_answer_free(&a);
  return res;
}

json_t *mcp_resources_templates(void) {
  return json_pack("{s:[{s:s, s:s, s:s}]}", "resourceTemplates", "uriTemplate",
                   PREFIX "{sandbox_id}/files/{+path}", "name", "sandbox-file", "description",
                   "a file of a sandbox, by its absolute path (text, or bytes in base64)");
}

/* The uri's sandbox id (into id) and file path (NULL: the sandbox itself). */
static bool parse_uri(const char *uri, char id[65], const char **path) {
  if (!uri || strncmp(uri, PREFIX, strlen(PREFIX)) != 0)
    return false;
  const char *p = uri + strlen(PREFIX);
  size_t k = strcspn(p, "/");
  if (k == 0 || k > 64)
    return false;
  memcpy(id, p, k);
  id[k] = '\0';
  p += k;
  if (*p == '\0') {
    *path = NULL;
    return true;
  }
  if (strncmp(p, "/files/", 7) != 0 || p[7] == '\0')
    return false;
  *path = p + 6; /* keeps its leading slash */
  return true;
}

json_t *mcp_resources_read(struct mcp_session *s, json_t *params, bool *is_error, char *why,
                           size_t n) {
  const char *uri = json_string_value(json_object_get(params, "uri"));
  char id[65];
  const char *file;
  if (!parse_uri(uri, id, &file)) {
    *is_error = true;
    snprintf(why, n, "no such resource '%.128s' (hutch://sandboxes/ID or .../ID/files/PATH)",
             uri ? uri : "");
    return NULL;
  }
  char path[8192];
  char *eid = hc_escape(id);
  if (file) {
    char *q = hc_escape(file);
    snprintf(path, sizeof path, "/v1/sandboxes/%s/files?path=%s", eid, q);
    free(q);
  } else {
    snprintf(path, sizeof path, "/v1/sandboxes/%s", eid);
  }
  free(eid);
  struct hc_req call = {.method = "GET", .path = path, .timeout_ms = 120000};
  struct hc_answer a;
  json_t *res = NULL;
  if (!hc_call(&s->native, &call, &a)) {
    *is_error = true;
    snprintf(why, n, "%s", a.message);
  } else if (!failed(&a, is_error, why, n)) {
    if (a.len > MCP_FILE_MAX) {
      *is_error = true;
      snprintf(why, n, "more than %u bytes: read it with the read_file or exec tool", MCP_FILE_MAX);
    } else {
      json_t *text = memchr(a.body, '\0', a.len) ? NULL : json_stringn(a.body, a.len);
      json_t *item;
      if (text) {
        item = json_pack("{s:s, s:s, s:o}", "uri", uri, "mimeType",
                         file ? "text/plain" : "application/json", "text", text);
      } else {
        char *b64 = xmalloc(4 * ((a.len + 2) / 3) + 1);
        EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)a.body, (int)a.len);
        item = json_pack("{s:s, s:s, s:s}", "uri", uri, "mimeType", "application/octet-stream",
                         "blob", b64);
        free(b64);
      }
      res = json_pack("{s:[o]}", "contents", item);
    }
  }
  hc_answer_free(&a);
  return res;
}
