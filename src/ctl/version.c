/* hutch version: this hutch's version and, when one answers, the
 * server's (GET /healthz). */
#include <stdio.h>

#include "ctl.h"
#include "frame.h"

static int version_run(struct ctl *ctl, int argc, char **argv) {
  int c, rc;
  const char *arg;
  while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0)
    ;
  if (!ctl_opts_end(ctl, c, argc, argv, 0, 0, &rc))
    return rc;

  printf("hutch %s (agent protocol %d)\n", HUTCH_VERSION, HUTCH_PROTOCOL_VERSION);
  char why[512];
  if (hc_client_setup(&ctl->client, ctl->url, ctl->key, why, sizeof why) == HC_SETUP_BAD_URL)
    return ctl_fail(ctl, CTL_EXIT_FAILED, "%s", why);

  /* /healthz needs no key: ask it even when there is none. */
  hc_init();
  struct hc_req req = {.method = "GET", .path = "/healthz", .timeout_ms = 5000};
  struct hc_answer a;
  bool answered = hc_call(&ctl->client, &req, &a);
  char *v = ctl_clean(json_string_value(json_object_get(a.json, "version")) ?: "(version not said)",
                      CTL_CLEAN_TEXT);
  if (answered && a.status == 200)
    printf("server %s: hutch %s\n", ctl->client.url, v);
  else
    printf("server %s: not reachable\n", ctl->client.url);
  free(v);
  hc_answer_free(&a);
  return 0;
}

const struct ctl_verb ctl_verb_version = {"version", "", "print hutch's version and the server's",
                                          NULL, version_run};
