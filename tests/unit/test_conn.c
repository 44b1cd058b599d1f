/* A framed connection over a non-blocking socketpair (src/proto/conn.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "tap.h"

struct pair {
  struct hutch_conn a, b; /* a sends, b receives */
};

struct got {
  uint8_t type, flags;
  uint32_t stream, len;
  uint8_t *data;
};

static void pair_open(struct pair *p) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
    perror("socketpair");
    exit(1);
  }
  hutch_conn_init(&p->a, sv[0]);
  hutch_conn_init(&p->b, sv[1]);
}

static void pair_close(struct pair *p) {
  hutch_conn_free(&p->a);
  hutch_conn_free(&p->b);
}

static void got_free(struct got *g, int n) {
  for (int i = 0; i < n; i++)
    free(g[i].data);
}

/* Parse every complete frame b holds into out[*n...]; -1 on a malformed one. */
static int drain(struct hutch_conn *b, struct got *out, int max, int *n) {
  struct hutch_err err;
  struct hutch_frame f;
  int r;
  while ((r = hutch_conn_next(b, &f, &err)) > 0) {
    if (*n < max) {
      out[*n] = (struct got){f.type, f.flags, f.stream, f.len, malloc(f.len ? f.len : 1)};
      memcpy(out[*n].data, f.payload, f.len);
    }
    (*n)++;
  }
  if (r < 0)
    diag("hutch_conn_next: %s", err.msg);
  return r;
}

/* Alternate a's flush and b's fill until b has parsed `want` frames.
 * *partial counts the rounds that ended with part of a frame buffered in b.
 * fills_per_parse > 1 makes b read several times before it parses. */
static int pump(struct pair *p, struct got *out, int want, int fills_per_parse, int *partial) {
  struct hutch_err err;
  int n = 0;
  for (int round = 0; round < 100000 && n < want; round++) {
    if (hutch_conn_flush(&p->a, &err) < 0 || hutch_conn_fill(&p->b, &err) < 0) {
      diag("%s", err.msg);
      return -1;
    }
    if (round % fills_per_parse != fills_per_parse - 1)
      continue;
    if (drain(&p->b, out, want, &n) < 0)
      return -1;
    if (partial && p->b.in.end > p->b.in.start)
      (*partial)++;
  }
  return n;
}

static void fill_pattern(uint8_t *d, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    d[i] = (uint8_t)(i * 131 + seed + i / 4096);
}

static void test_simple(void) {
  struct pair p;
  struct hutch_err err;
  struct got g[4] = {0};
  pair_open(&p);
  struct hutch_frame f;
  is_int(hutch_conn_next(&p.b, &f, &err), 0, "next on a fresh connection: 0");

  hutch_conn_send(&p.a, HUTCH_F_OPEN, 0, 1, "{\"op\":\"exec\"}", 13);
  hutch_conn_send(&p.a, HUTCH_F_STDIN, HUTCH_FL_EOF, 1, NULL, 0);
  hutch_conn_send(&p.a, HUTCH_F_STDOUT, HUTCH_FL_END, 0xffffffff, "out", 3);
  is_int(hutch_conn_queued(&p.a), 3 * HUTCH_FRAME_HEADER + 16, "three frames queued");
  is_int(hutch_conn_flush(&p.a, &err), 0, "flush sends all: 0");
  is_int(hutch_conn_queued(&p.a), 0, "nothing queued after flush");
  is_int(hutch_conn_fill(&p.b, &err), 0, "fill: 0");
  ok(!p.b.eof, "no eof while the peer is open");
  int n = 0;
  is_int(drain(&p.b, g, 4, &n), 0, "next ends with 0 once the buffer is drained");
  is_int(n, 3, "three frames received");
  ok(g[0].type == HUTCH_F_OPEN && g[0].flags == 0 && g[0].stream == 1 && g[0].len == 13 &&
         memcmp(g[0].data, "{\"op\":\"exec\"}", 13) == 0,
     "frame 1: OPEN with JSON payload");
  ok(g[1].type == HUTCH_F_STDIN && g[1].flags == HUTCH_FL_EOF && g[1].stream == 1 && g[1].len == 0,
     "frame 2: empty STDIN with EOF");
  ok(g[2].type == HUTCH_F_STDOUT && g[2].flags == HUTCH_FL_END && g[2].stream == 0xffffffff &&
         g[2].len == 3 && memcmp(g[2].data, "out", 3) == 0,
     "frame 3: STDOUT on stream 0xffffffff with END");
  got_free(g, n < 4 ? n : 4);

  hutch_conn_send(&p.a, HUTCH_F_STDOUT, 0, 5, "first", 5);
  hutch_conn_send(&p.a, HUTCH_F_STDOUT, 0, 5, "second", 6);
  hutch_conn_flush(&p.a, &err);
  hutch_conn_fill(&p.b, &err);
  struct hutch_frame f1, f2;
  int r1 = hutch_conn_next(&p.b, &f1, &err), r2 = hutch_conn_next(&p.b, &f2, &err);
  ok(r1 == 1 && r2 == 1 && f1.len == 5 && memcmp(f1.payload, "first", 5) == 0 && f2.len == 6 &&
         memcmp(f2.payload, "second", 6) == 0,
     "a frame's payload stays valid across later calls to next");
  pair_close(&p);
}

static void test_many(void) {
  enum { N = 2000 };
  struct pair p;
  struct got *g = calloc(N, sizeof *g);
  uint8_t *buf = malloc(70000);
  pair_open(&p);
  for (int i = 0; i < N; i++) {
    uint32_t len = (uint32_t)(i * 37 % 70000);
    fill_pattern(buf, len, (unsigned)i);
    hutch_conn_send(&p.a, (uint8_t)(1 + i % HUTCH_F_TYPE_MAX), (uint8_t)(i % 4), (uint32_t)i, buf,
                    len);
  }
  int n = pump(&p, g, N, 1, NULL);
  is_int(n, N, "%d frames of 0..70000 bytes all arrive", N);
  bool same = true;
  for (int i = 0; i < (n < N ? n : N); i++) {
    uint32_t len = (uint32_t)(i * 37 % 70000);
    fill_pattern(buf, len, (unsigned)i);
    same &= g[i].type == 1 + i % HUTCH_F_TYPE_MAX && g[i].flags == i % 4 &&
            g[i].stream == (uint32_t)i && g[i].len == len && memcmp(g[i].data, buf, len) == 0;
  }
  ok(same, "... in order, each with its own type, flags, stream and payload");
  got_free(g, n < N ? n : N);
  free(g);
  free(buf);
  pair_close(&p);
}

static void test_max_payload(void) {
  struct pair p;
  struct got g[8] = {0};
  uint8_t *big = malloc(HUTCH_FRAME_MAX);
  pair_open(&p);

  fill_pattern(big, HUTCH_FRAME_MAX, 7);
  hutch_conn_send(&p.a, HUTCH_F_STDIN, 0, 3, big, HUTCH_FRAME_MAX);
  hutch_conn_send(&p.a, HUTCH_F_STDIN, HUTCH_FL_EOF, 3, "tail", 4);
  int partial = 0;
  int n = pump(&p, g, 2, 1, &partial);
  is_int(n, 2, "a 1 MiB frame and a small one arrive");
  ok(partial > 0, "the 1 MiB frame arrived in pieces (%d partial rounds)", partial);
  ok(n >= 1 && g[0].len == HUTCH_FRAME_MAX && memcmp(g[0].data, big, HUTCH_FRAME_MAX) == 0,
     "the 1 MiB payload is intact");
  ok(n >= 2 && g[1].flags == HUTCH_FL_EOF && g[1].len == 4 && memcmp(g[1].data, "tail", 4) == 0,
     "the frame after it is intact");
  got_free(g, n < 8 ? n : 8);

  /* The receiver reads many times before parsing: fill stops at one frame's
   * worth buffered, and nothing is lost across several maximal frames. */
  for (int i = 0; i < 4; i++) {
    fill_pattern(big, HUTCH_FRAME_MAX, 100u + (unsigned)i);
    hutch_conn_send(&p.a, HUTCH_F_STDOUT, 0, (uint32_t)i, big, HUTCH_FRAME_MAX);
  }
  n = pump(&p, g, 4, 16, NULL);
  is_int(n, 4, "four 1 MiB frames arrive with the receiver filling 16 times per parse");
  bool same = true;
  for (int i = 0; i < (n < 4 ? n : 4); i++) {
    fill_pattern(big, HUTCH_FRAME_MAX, 100u + (unsigned)i);
    same &= g[i].stream == (uint32_t)i && g[i].len == HUTCH_FRAME_MAX &&
            memcmp(g[i].data, big, HUTCH_FRAME_MAX) == 0;
  }
  ok(same, "... each intact and in order");
  got_free(g, n < 4 ? n : 4);
  free(big);
  pair_close(&p);
}

static void test_backpressure(void) {
  struct pair p;
  struct hutch_err err;
  struct got g[8] = {0};
  uint8_t *big = calloc(1, HUTCH_FRAME_MAX);
  pair_open(&p);
  for (int i = 0; i < 4; i++)
    hutch_conn_send(&p.a, HUTCH_F_STDOUT, 0, (uint32_t)i, big, HUTCH_FRAME_MAX);
  size_t total = hutch_conn_queued(&p.a);
  is_int(hutch_conn_flush(&p.a, &err), 1, "flush with a peer that does not read: 1 (pending)");
  size_t left = hutch_conn_queued(&p.a);
  ok(left > 0 && left < total, "part was sent, %zu of %zu bytes remain queued", left, total);
  is_int(hutch_conn_flush(&p.a, &err), 1, "flush again, peer still not reading: 1");
  is_int(hutch_conn_queued(&p.a), left, "... and nothing more was sent");

  int n = pump(&p, g, 4, 1, NULL);
  is_int(n, 4, "once the peer reads, every frame arrives");
  is_int(hutch_conn_flush(&p.a, &err), 0, "flush completes: 0");
  is_int(hutch_conn_queued(&p.a), 0, "nothing left queued");
  got_free(g, n < 8 ? n : 8);
  free(big);
  pair_close(&p);
}

static void test_eof(void) {
  struct pair p;
  struct hutch_err err;
  struct hutch_frame f;
  pair_open(&p);
  is_int(hutch_conn_fill(&p.b, &err), 0, "fill with nothing to read: 0");
  ok(!p.b.eof, "... and no eof");

  hutch_conn_send(&p.a, HUTCH_F_EVENT, HUTCH_FL_END, 1, "{}", 2);
  hutch_conn_flush(&p.a, &err);
  hutch_conn_free(&p.a);
  is_int(hutch_conn_fill(&p.b, &err), 0, "fill after the peer closed: 0");
  ok(p.b.eof, "peer close sets eof");
  ok(hutch_conn_next(&p.b, &f, &err) == 1 && f.type == HUTCH_F_EVENT && f.len == 2,
     "the frame sent before the close is still delivered");
  is_int(hutch_conn_next(&p.b, &f, &err), 0, "then no more frames");
  pair_close(&p);

  /* Writing to a closed peer is an error, not a SIGPIPE. */
  pair_open(&p);
  hutch_conn_free(&p.b);
  hutch_conn_send(&p.a, HUTCH_F_STDOUT, 0, 1, "x", 1);
  memset(&err, 0, sizeof err);
  is_int(hutch_conn_flush(&p.a, &err), -1, "flush to a closed peer: -1 (no SIGPIPE)");
  is_int(err.errnum, EPIPE, "... with EPIPE");
  ok(err.msg[0] != '\0', "... and a message: %s", err.msg);
  pair_close(&p);
}

static void test_garbage(void) {
  struct pair p;
  struct hutch_err err;
  struct hutch_frame f;
  pair_open(&p);
  /* length 5, type 0: not a frame */
  static const uint8_t junk[] = {0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 'h', 'e', 'l', 'l', 'o'};
  ok(write(p.a.fd, junk, sizeof junk) == (ssize_t)sizeof junk, "raw garbage written");
  hutch_conn_fill(&p.b, &err);
  memset(&err, 0, sizeof err);
  is_int(hutch_conn_next(&p.b, &f, &err), -1, "a garbage header: next returns -1");
  is_int(err.errnum, EPROTO, "... with EPROTO");
  ok(err.msg[0] != '\0', "... and a message: %s", err.msg);
  pair_close(&p);

  pair_open(&p);
  static const uint8_t half[] = {0, 0, 0, 1, 3, 0};
  ok(write(p.a.fd, half, sizeof half) == (ssize_t)sizeof half, "half a valid header written");
  hutch_conn_fill(&p.b, &err);
  is_int(hutch_conn_next(&p.b, &f, &err), 0, "half a header: next returns 0");
  pair_close(&p);
}

static void test_window(void) {
  static const uint32_t incs[] = {1, HUTCH_WINDOW_INITIAL, 0x01020304, UINT32_MAX};
  struct pair p;
  struct got g[4] = {0};
  pair_open(&p);
  for (int i = 0; i < 4; i++)
    hutch_conn_send_window(&p.a, (uint32_t)(i + 7), incs[i]);
  int n = pump(&p, g, 4, 1, NULL);
  is_int(n, 4, "four WINDOW frames arrive");
  for (int i = 0; i < (n < 4 ? n : 4); i++) {
    struct hutch_frame f = {g[i].type, g[i].flags, g[i].stream, g[i].len, g[i].data};
    ok(f.type == HUTCH_F_WINDOW && f.flags == 0 && f.stream == (uint32_t)(i + 7) && f.len == 4 &&
           hutch_conn_window_increment(&f) == incs[i],
       "WINDOW round trip: stream %d, increment %u", i + 7, incs[i]);
  }
  got_free(g, n < 4 ? n : 4);
  pair_close(&p);

  static const uint8_t bytes[8] = {0, 0, 0, 9, 0, 0, 0, 9};
  for (uint32_t len = 0; len <= 8; len++) {
    if (len == 4)
      continue;
    struct hutch_frame f = {HUTCH_F_WINDOW, 0, 1, len, bytes};
    is_u64(hutch_conn_window_increment(&f), 0, "WINDOW payload of %u bytes: malformed, 0", len);
  }
}

/* send_now: frames sent at once while nothing is queued, their rest (a
 * header cut anywhere, or the payload's tail) and what follows queued in
 * order; in place: room filled, then committed. */
static void test_send_now(void) {
  struct pair p;
  struct hutch_err err;
  size_t n1 = 3 << 20, n2 = 5000;
  uint8_t *big = malloc(n1), *small = malloc(n2);
  fill_pattern(big, n1, 1);
  fill_pattern(small, n2, 2);
  pair_open(&p);
  int buf = 4096;
  setsockopt(p.a.fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  hutch_conn_send_now(&p.a, HUTCH_F_STDIN, 0, 1, small, n2);
  ok(hutch_conn_queued(&p.a) < n2 + HUTCH_FRAME_HEADER, "a first frame went (in part) at once");
  for (size_t off = 0; off < n1; off += HUTCH_DATA_CHUNK)
    hutch_conn_send_now(&p.a, HUTCH_F_STDIN, 0, 2, big + off, HUTCH_DATA_CHUNK);
  uint8_t *room = hutch_conn_room(&p.a, 100);
  memcpy(room, "in place", 8);
  hutch_conn_commit(&p.a, HUTCH_F_STDOUT, HUTCH_FL_END, 3, 8);
  int want = 2 + (int)(n1 / HUTCH_DATA_CHUNK), n = 0;
  uint8_t *got = malloc(n1);
  size_t at = 0;
  bool order = true;
  for (int round = 0; round < 100000 && n < want; round++) {
    if (hutch_conn_flush(&p.a, &err) < 0 || hutch_conn_fill(&p.b, &err) < 0)
      break;
    struct hutch_frame f;
    while (hutch_conn_next(&p.b, &f, &err) > 0) {
      if (n == 0)
        order &= f.stream == 1 && f.len == n2 && memcmp(f.payload, small, n2) == 0;
      else if (n < want - 1 && f.stream == 2 && at + f.len <= n1) {
        memcpy(got + at, f.payload, f.len);
        at += f.len;
      } else if (n == want - 1)
        order &= f.stream == 3 && f.flags == HUTCH_FL_END && f.len == 8 &&
                 memcmp(f.payload, "in place", 8) == 0;
      else
        order = false;
      n++;
    }
  }
  is_int(n, want, "every frame arrives");
  ok(order, "in the order sent, whole");
  ok(at == n1 && memcmp(got, big, n1) == 0, "the payloads sent at once and queued join up");
  free(got);
  free(big);
  free(small);
  pair_close(&p);
}

int main(void) {
  test_simple();
  test_many();
  test_max_payload();
  test_backpressure();
  test_eof();
  test_garbage();
  test_window();
  test_send_now();
  return done_testing();
}
