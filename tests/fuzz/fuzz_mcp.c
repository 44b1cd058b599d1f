/* libFuzzer target: MCP messages (src/mcp/engine.c, modern.c, schema.c
 * and the tools' argument handling), as a client sends them on stdio or
 * in a POST to /mcp. A message is anyone's text: no input may crash, leak,
 * hang or go unanswered.
 *
 * Input: one message. The session is initialized first (unless the input
 * is itself an initialize), and its native API is a loopback port that
 * refuses connections, so that a tool whose arguments pass its schema runs
 * to its native call and answers that call's failure. Checked: a request
 * gets exactly one response, with its id; a tool's error result carries
 * text; every answer serialises as JSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void dropped(void *arg, json_t *msg) {
  (*(unsigned *)arg)++;
  json_decref(msg);
}

static void check_answer(json_t *msg, json_t *res) {
  json_t *id = json_object_get(msg, "id");
  if (!res)
    return;
  char *text = json_dumps(res, JSON_COMPACT);
  if (!text)
    abort(); /* an answer that cannot be written */
  free(text);
  json_t *rid = json_object_get(res, "id");
  if (id && (json_is_string(id) || json_is_integer(id)) && !json_equal(id, rid))
    abort(); /* answered under another id */
  json_t *r = json_object_get(res, "result");
  if (json_is_true(json_object_get(r, "isError"))) {
    json_t *first = json_array_get(json_object_get(r, "content"), 0);
    const char *t = json_string_value(json_object_get(first, "text"));
    if (!t || !*t)
      abort(); /* an error with nothing to read */
  }
  if (!r && !json_object_get(res, "error"))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool once;
  if (!once) {
    hc_init();
    once = true;
  }
  json_t *msg = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
  if (!msg)
    return 0;

  struct hc_client n = {.url = "http://127.0.0.1:1", .key = "k"};
  struct mcp_session s;
  mcp_session_init(&s, &n, NULL);
  unsigned notes = 0;
  struct mcp_sink sink = {.send = dropped, .arg = &notes};
  json_t *init = json_pack("{s:s, s:i, s:s, s:{s:s}}", "jsonrpc", "2.0", "id", 0, "method",
                           "initialize", "params", "protocolVersion", MCP_LATEST);
  json_decref(mcp_handle(&s, init, &sink));
  json_decref(init);

  json_t *res = mcp_handle(&s, msg, &sink);
  bool request = json_is_object(msg) && mcp_is_request(msg);
  if (request && !res)
    abort(); /* a request left unanswered */
  check_answer(msg, res);
  json_decref(res);
  json_decref(msg);
  mcp_session_end(&s);
  return 0;
}
