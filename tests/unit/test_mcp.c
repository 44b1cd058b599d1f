/* The MCP pieces that need no server (src/mcp/): the input-schema checker
 * against the tools' own schemas, the cutting of long output, and the
 * tool table's shape. */
#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "schema.h"
#include "tap.h"
#include "tools.h"

/* Check args (JSON text) against tool's schema: want_why NULL means it
 * must fit, else the refusal must contain want_why. */
static void args_are(const char *tool, const char *args, const char *want_why) {
  const struct mcp_tool *t = mcp_tool_find(tool);
  json_t *schema = json_loads(t->schema, 0, NULL);
  json_t *v = json_loads(args, JSON_DECODE_ANY, NULL);
  char why[512] = "";
  bool fits = mcp_schema_check(schema, v, why, sizeof why);
  if (!want_why)
    ok(fits, "%s %s fits (%s)", tool, args, why);
  else
    ok(!fits && strstr(why, want_why), "%s %s refused with '%s' (got '%s')", tool, args, want_why,
       why);
  json_decref(schema);
  json_decref(v);
}

static void test_schemas(void) {
  args_are("exec", "{\"sandbox_id\":\"a\",\"command\":\"true\"}", NULL);
  args_are("exec",
           "{\"sandbox_id\":\"a\",\"command\":\"x\",\"env\":{\"K\":\"v\"},\"timeout_s\":1.5}",
           NULL);
  args_are("exec", "{\"sandbox_id\":\"a\"}", "'command' is required");
  args_are("exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"bogus\":1}", "unknown field 'bogus'");
  args_are("exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"bogus\":1}", "cwd, env");
  args_are("exec", "{\"sandbox_id\":7,\"command\":\"x\"}",
           "arguments.sandbox_id: must be string, not an integer");
  args_are("exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"env\":{\"K\":1}}",
           "arguments.env.K: must be string");
  args_are("exec", "{\"sandbox_id\":\"a\",\"command\":\"x\",\"timeout_s\":-1}", "at least 0");
  args_are("exec", "{\"sandbox_id\":\"a\",\"command\":\"\"}", "at least 1 characters");
  args_are("exec", "[1]", "must be object, not an array");
  args_are("run_code", "{\"sandbox_id\":\"a\",\"code\":\"1\",\"language\":\"cobol\"}",
           "must be one of");
  args_are("exec_read", "{\"sandbox_id\":\"a\",\"pid\":3,\"wait_ms\":30001}", "at most 30000");
  args_are("exec_read", "{\"sandbox_id\":\"a\",\"pid\":2.5}", "must be integer");
  args_are("exec_read", "{\"sandbox_id\":\"a\",\"pid\":2.0}", NULL);
  args_are("create", "{\"allow_hosts\":[\"pypi.org\",5]}", "arguments.allow_hosts[1]");
  args_are("create", "{}", NULL);
  args_are("list", "{\"x\":1}", "unknown field 'x'");
  args_are("write_file",
           "{\"sandbox_id\":\"a\",\"path\":\"/f\",\"content\":\"\",\"encoding\":\"hex\"}",
           "must be one of");
}

/* A long output is cut to its head and tail around a marker that counts
 * what was left out and names where the whole is. */
static void test_cut(void) {
  struct mcp_output o = {0};
  mcp_output_add(&o, "short", 5);
  char *s = mcp_output_show(&o, 100, "/tmp/x");
  is_str(s, "short", "an output that fits is shown whole");
  free(s);
  mcp_output_free(&o);

  char *big = malloc(100000);
  memset(big, 'a', 100000);
  memset(big, 'H', 10);
  memset(big + 99990, 'T', 10);
  mcp_output_add(&o, big, 100000);
  s = mcp_output_show(&o, 1000, "/tmp/hutch-mcp/out.txt");
  ok(strncmp(s, "HHHHHHHHHH", 10) == 0, "the head is kept");
  ok(strcmp(s + strlen(s) - 10, "TTTTTTTTTT") == 0, "the tail is kept");
  ok(strstr(s, "99000 of 100000 bytes left out") != NULL, "the marker counts bytes: %.120s",
     strstr(s, "[..."));
  ok(strstr(s, "/tmp/hutch-mcp/out.txt") != NULL, "the marker names the whole's file");
  ok(strlen(s) < 1400, "what is shown is bounded (%zu bytes)", strlen(s));
  free(s);
  s = mcp_output_show(&o, 1000, NULL);
  ok(strstr(s, "could not be kept") != NULL, "a whole not kept is said so");
  free(s);
  mcp_output_free(&o);

  /* A cut never splits a UTF-8 character. */
  for (int i = 0; i < 1000; i++)
    mcp_output_add(&o, "\xe2\x82\xac", 3);
  s = mcp_output_show(&o, 101, NULL);
  json_t *j = json_string(s);
  ok(j != NULL, "the cut text is still UTF-8");
  json_decref(j);
  free(s);
  mcp_output_free(&o);
  free(big);
}

/* The tools' table: unique names, schemas that parse, strict objects. */
static void test_table(void) {
  for (size_t i = 0; i < mcp_ntools; i++) {
    const struct mcp_tool *t = &mcp_tools[i];
    json_t *j = mcp_tool_json(t);
    json_t *schema = json_object_get(j, "inputSchema");
    ok(schema && json_is_false(json_object_get(schema, "additionalProperties")),
       "%s: a strict object schema", t->name);
    ok(mcp_tool_find(t->name) == t, "%s: found by its name, once", t->name);
    json_decref(j);
  }
  ok(mcp_tool_find("nope") == NULL && mcp_tool_find(NULL) == NULL, "no tool by another name");
}

int main(void) {
  test_schemas();
  test_cut();
  test_table();
  return done_testing();
}
