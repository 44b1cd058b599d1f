/* The event ring (src/server/core/events/events.c) and a webhook's
 * signature (core/hooks/hooksign.c): events kept in order and found by
 * their number, the oldest dropped past the ring's size, what one carries
 * bounded, the type filters,
 * the numbers going on past a restart (a real store), and the signature
 * against one computed by Python's hmac module. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/server.h"
#include "core/events/events.h"
#include "core/hooks/hooksign.h"
#include "state/seal.h"
#include "state/store.h"
#include "tap.h"
#include "util.h"

struct counted {
  struct events_sub sub;
  int heard;
};

static void heard(struct events_sub *s) {
  ((struct counted *)s)->heard++;
}

static void ring(void) {
  struct server srv = {0};
  struct hutch_err err = {0};
  ok(events_open(&srv, 4, 3600, &err) == 0, "a ring of 4 opens");
  is_u64(events_first(&srv), 1, "empty: its first is the next, 1");

  struct counted c = {.sub.notify = heard};
  events_subscribe(&srv, &c.sub);
  for (int i = 0; i < 6; i++)
    events_emit(&srv, i % 2 ? "exec.ended" : "sandbox.created", i < 3 ? "t1" : "t2", "abc", NULL);
  is_int(c.heard, 6, "a subscriber hears each event");
  events_unsubscribe(&srv, &c.sub);
  events_emit(&srv, "sandbox.killed", "t1", NULL, json_pack("{s:s}", "reason", "request"));
  is_int(c.heard, 6, "not once unsubscribed");

  is_u64(events_next(&srv), 8, "seven events: the next is 8");
  is_u64(events_first(&srv), 4, "four kept: 4 to 7");
  ok(!events_at(&srv, 3), "the dropped one is not found");
  ok(!events_at(&srv, 8), "nor one to come");
  const struct event *e = events_at(&srv, 7);
  ok(e && e->seq == 7 && strcmp(e->type, "sandbox.killed") == 0, "7 is found by its number");
  ok(e && strstr(e->line, "\"seq\":7,") && strstr(e->line, "\"sandbox\":null") &&
         strstr(e->line, "\"data\":{\"reason\":\"request\"}") && e->line[e->len - 1] == '\n',
     "its line: %s", e ? e->line : "");

  struct events_filter f = {.tenant = "t2"};
  ok(events_filter_types(&f, "sandbox.*,exec.started", &err) == 0, "a prefix and a type");
  ok(events_filter_match(&f, events_at(&srv, 5)), "t2's sandbox.created passes");
  ok(!events_filter_match(&f, events_at(&srv, 6)), "exec.ended does not");
  ok(!events_filter_match(&f, events_at(&srv, 7)), "nor t1's");
  ok(!events_filter_type(&f, "sandboxes"), "a prefix is a whole word");
  struct events_filter bad = {0};
  const char *wrong[] = {"Sandbox", "a..b", ".a", "a.", "*", "a,", "a.*.b", NULL};
  for (const char **w = wrong; *w; w++)
    ok(events_filter_types(&bad, *w, &err) < 0, "'%s' is refused", *w);

  size_t n;
  char *gap = events_gap_line(2, 4, "not kept", &n);
  ok(strstr(gap, "\"type\":\"events.gap\"") && strstr(gap, "\"after\":2,\"next\":4") &&
         gap[n - 1] == '\n',
     "a gap line: %s", gap);
  free(gap);
  events_free(&srv);
}

/* What an event carries is bounded: an exec's argv to EVENTS_CMD_MAX in
 * all (cmd_cut), any other string to EVENTS_STRING_MAX (cut), at a
 * character's start; the caller's values are left as they were. */
static void bounded(void) {
  struct server srv = {0};
  struct hutch_err err = {0};
  ok(events_open(&srv, 8, 3600, &err) == 0, "a ring opens");
  char big[801];
  memset(big, 'a', 800);
  big[800] = '\0';
  json_t *argv = json_pack("[s,s,s]", big, big, big);
  events_emit(&srv, "exec.started", "t", "abc", json_pack("{s:O}", "cmd", argv));
  const struct event *e = events_at(&srv, 1);
  json_t *o = e ? json_loads(e->line, 0, NULL) : NULL;
  json_t *cmd = json_object_get(json_object_get(o, "data"), "cmd");
  size_t total = 0, i;
  json_t *a;
  json_array_foreach(cmd, i, a) total += json_string_length(a);
  is_int((int)json_array_size(cmd), 2, "the argv past the cap is left out");
  is_int((int)total, EVENTS_CMD_MAX, "what is kept is the cap's worth");
  ok(json_is_true(json_object_get(json_object_get(o, "data"), "cmd_cut")), "and it says so");
  is_int((int)json_array_size(argv), 3, "the caller's argv is untouched");
  ok(json_string_length(json_array_get(argv, 1)) == 800, "its arguments too");
  json_decref(o);

  /* 1023 ASCII bytes, then a two-byte character across the cap. */
  char *s = xmalloc(EVENTS_STRING_MAX + 8);
  memset(s, 'b', EVENTS_STRING_MAX - 1);
  strcpy(s + EVENTS_STRING_MAX - 1, "\xc3\xa9tail");
  events_emit(&srv, "sandbox.created", "t", "abc",
              json_pack("{s:{s:s}}", "metadata", "note", s));
  e = events_at(&srv, 2);
  o = e ? json_loads(e->line, 0, NULL) : NULL;
  json_t *data = json_object_get(o, "data");
  is_int((int)json_string_length(json_object_get(json_object_get(data, "metadata"), "note")),
         EVENTS_STRING_MAX - 1, "a long string is cut at a character's start");
  ok(json_is_true(json_object_get(data, "cut")), "and the event says so");
  json_decref(o);
  free(s);
  json_decref(argv);
  events_free(&srv);
}

/* Numbers are reserved a block at a time: a server killed at any point
 * leaves the next start past every number it handed out. */
static void restart(void) {
  char dir[] = "/tmp/hutch-events-XXXXXX";
  ok(mkdtemp(dir) != NULL, "a state dir");
  char *db = xasprintf("%s/hutch.db", dir);
  unsigned char key[SEAL_KEY_LEN] = {1};
  struct hutch_err err = {0};
  uint64_t last = 0;
  for (int run = 0; run < 2; run++) {
    struct server srv = {0};
    ok(store_open(db, key, &srv.store, &err) == 0, "the store opens: %s", err.msg);
    ok(events_open(&srv, 16, 3600, &err) == 0, "the ring opens");
    ok(events_next(&srv) > last, "run %d starts at %llu, past %llu", run,
       (unsigned long long)events_next(&srv), (unsigned long long)last);
    for (int i = 0; i < 3; i++)
      events_emit(&srv, "sandbox.created", "t", NULL, NULL);
    last = events_next(&srv) - 1;
    events_free(&srv);
    store_close(srv.store);
  }
  unlink(db);
  char *wal = xasprintf("%s-wal", db), *shm = xasprintf("%s-shm", db);
  unlink(wal);
  unlink(shm);
  rmdir(dir);
  free(wal);
  free(shm);
  free(db);
}

static void signature(void) {
  char hex[65];
  hooksign("whsec_test_secret_0123", 1700000000, "{\"seq\":1}", 9, hex);
  /* python3: hmac.new(b"whsec_test_secret_0123", b'1700000000.{"seq":1}',
   * hashlib.sha256).hexdigest() */
  is_str(hex, "2d4a76b2f27dd94f8b4142d5a81bffe74af0ae2cdf86c0b88b0032d01d4d71ec",
         "the signature is HMAC-SHA256 over TIMESTAMP.BODY");
  char other[65];
  hooksign("whsec_test_secret_0123", 1700000001, "{\"seq\":1}", 9, other);
  ok(strcmp(hex, other) != 0, "another timestamp, another signature");
}

int main(void) {
  ring();
  bounded();
  restart();
  signature();
  return done_testing();
}
