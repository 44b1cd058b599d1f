/* E2B's template build spec as a Dockerfile (src/server/e2b/tplbuild.c):
 * each step as the builder reads it, and every argument that could start
 * an instruction of its own or expand where it should not refused or
 * quoted. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tap.h"
#include "e2b/tplbuild.h"

#define HASH "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char *df(const char *spec, const char *user, json_t **hashes, struct hutch_err *err) {
  json_t *o = json_loads(spec, 0, NULL);
  *hashes = json_array();
  char *out = e2b_dockerfile(o, user, *hashes, err);
  json_decref(o);
  return out;
}

static void translates(const char *spec, const char *want, const char *what) {
  struct hutch_err err = {0};
  json_t *h;
  char *got = df(spec, "root", &h, &err);
  is_str(got ? got : err.msg, want, "%s", what);
  free(got);
  json_decref(h);
}

static void refused(const char *spec, const char *code, const char *what) {
  struct hutch_err err = {0};
  json_t *h;
  char *got = df(spec, "root", &h, &err);
  ok(!got && err.msg[0], "%s: refused", what);
  if (code)
    is_str(err.code ? err.code : "", code, "%s: code", what);
  free(got);
  json_decref(h);
}

int main(void) {
  translates("{\"fromTemplate\":\"base\"}", "FROM base\n", "a template alone");
  translates("{\"fromImage\":\"debian:stable\",\"steps\":[]}", "FROM debian:stable\n", "an image");
  translates("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"RUN\",\"args\":[\"make\",\"root\"]}]}",
             "FROM b\nUSER root\nRUN [\"/bin/sh\",\"-c\",\"make\"]\nUSER root\n",
             "RUN as a user goes back after");
  translates("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"USER\",\"args\":[\"user\"]},"
             "{\"type\":\"RUN\",\"args\":[\"apt\",\"root\"]},{\"type\":\"RUN\",\"args\":[\"x\"]}]}",
             "FROM b\nUSER user\nUSER root\nRUN [\"/bin/sh\",\"-c\",\"apt\"]\nUSER user\n"
             "RUN [\"/bin/sh\",\"-c\",\"x\"]\n",
             "back to the user USER set");
  translates("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"RUN\",\"args\":[\"a\\nb\"]}]}",
             "FROM b\nRUN [\"/bin/sh\",\"-c\",\"a\\nb\"]\n", "a multi-line RUN in exec form");
  translates("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"RUN\",\"args\":[\"echo a \\\\\"]},"
             "{\"type\":\"WORKDIR\",\"args\":[\"/x\"]}]}",
             "FROM b\nRUN [\"/bin/sh\",\"-c\",\"echo a \\\\\"]\nWORKDIR /x\n",
             "a RUN ending in a backslash joins nothing to it");
  translates("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"ENV\",\"args\":[\"A\",\"x \\\"y\\\" "
             "$z\\\\\",\"B\",\"\"]}]}",
             "FROM b\nENV A=\"x \\\"y\\\" \\$z\\\\\" B=\"\"\n", "ENV values quoted");
  translates("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"WORKDIR\",\"args\":[\"/srv\"]}],"
             "\"startCmd\":\"run $X\",\"readyCmd\":\"test -f /r\"}",
             "FROM b\nWORKDIR /srv\nLABEL hutch.start_cmd=\"run \\$X\"\n"
             "LABEL hutch.ready_cmd=\"test -f /r\"\n",
             "start and ready commands as labels");

  struct hutch_err err = {0};
  json_t *h;
  char *got =
      df("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"COPY\",\"args\":[\"app\",\"/srv/\","
         "\"user\",\"\"],\"filesHash\":\"" HASH "\"}]}",
         "root", &h, &err);
  is_str(got ? got : err.msg, "FROM b\nCOPY --chown=user app /srv/\n", "COPY with its user");
  ok(json_array_size(h) == 1 && strcmp(json_string_value(json_array_get(h, 0)), HASH) == 0,
     "COPY's hash collected");
  free(got);
  json_decref(h);

  refused("{}", NULL, "no base");
  refused("{\"fromTemplate\":\"a\",\"fromImage\":\"b\"}", NULL, "two bases");
  refused("{\"fromImage\":\"a\\nRUN evil\"}", NULL, "a newline in the base");
  refused("{\"fromImage\":\"a\",\"fromImageRegistry\":{\"type\":\"registry\"}}", "not_supported",
          "registry credentials");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"HEALTHCHECK\",\"args\":[]}]}",
          "not_supported", "an unknown step");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"ENV\",\"args\":[\"A\",\"x\\nRUN y\"]}]}",
          NULL, "a newline in an ENV value");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"ENV\",\"args\":[\"A\"]}]}", NULL,
          "ENV without a value");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"USER\",\"args\":[\"a b\"]}]}", NULL,
          "USER of two words");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"RUN\",\"args\":[\"x\",\"u\\nRUN y\"]}]}",
          NULL, "a newline in RUN's user");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"COPY\",\"args\":[\"a\",\"/b\"]}]}", NULL,
          "COPY without its hash");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"COPY\",\"args\":[\"a b\",\"/b\"],"
          "\"filesHash\":\"" HASH "\"}]}",
          NULL, "COPY of a path with a space");
  refused("{\"fromTemplate\":\"b\",\"steps\":[{\"type\":\"COPY\",\"args\":[\"a\",\"/b\",\"\","
          "\"0755\"],\"filesHash\":\"" HASH "\"}]}",
          "not_supported", "COPY with a mode");
  refused("{\"fromTemplate\":\"b\",\"startCmd\":\"a\\nb\"}", NULL, "a two-line start command");
  refused("{\"fromTemplate\":\"b\",\"steps\":[7]}", NULL, "a step that is no object");
  return done_testing();
}
