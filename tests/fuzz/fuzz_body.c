/* libFuzzer target: the native exec and file routes' requests (body.c,
 * api_exec.c's api_exec_request, api_files.c) and what they make of the
 * agent's answers, against a fake sandbox (fake_server.h).
 *
 * Input: a selector byte (the route; its high bits the size of the
 * pieces a streamed body comes in), then fake_split's layout, whose
 * request is a query string line ("path=/x&user=root") and the body. */
#include <string.h>

#include "api/exec.h"
#include "api/files.h"
#include "fake_server.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
  void (*fn)(struct http_conn *c, const struct principal *p);
  bool streams_body;
} routes[] = {
    {api_exec, false},       {api_files_read, false},   {api_files_watch, false},
    {api_files_write, true}, {api_files_delete, false}, {api_files_stat, false},
    {api_files_list, false}, {api_files_mkdir, false},  {api_files_move, false},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t which = (data[0] & 0x0f) % ARRAY_SIZE(routes), chunk = 1 + (data[0] >> 4) * 17, n;
  struct fake_script s;
  const uint8_t *req = fake_split(data + 1, size - 1, &n, &s);
  const uint8_t *nl = memchr(req, '\n', n);
  size_t qlen = nl ? (size_t)(nl - req) : 0;
  char *query = strndup((const char *)req, qlen);
  const uint8_t *body = nl ? nl + 1 : req;
  size_t nbody = n - (size_t)(body - req);
  bool streamed = routes[which].streams_body;
  struct fake_req r = {
      streamed ? NULL : (const char *)body, streamed ? 0 : nbody, query, NULL, 0, DIALECT_HUTCH};
  struct http_conn *c = fake_request(&r, &s);
  routes[which].fn(c, fake_principal());
  fake_feed_body(body, nbody, chunk);
  fake_finish();
  free(query);
  return 0;
}
