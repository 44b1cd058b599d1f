/* libFuzzer target: WebSocket frames a client sends on a process's
 * socket (ws.c on wslay), against a fake process (fake_server.h): after
 * the handshake the input's bytes come as the client's, in pieces of a
 * size the input chooses; then the process ends and the client goes.
 *
 * What the server sent must be a 101 and then well-formed server frames
 * (unmasked, read back by a wslay client): text messages that are JSON
 * objects, and control frames.
 *
 * Input: a byte (the size of the pieces), then fake_split's layout:
 * flags, the client's bytes, the process's output line and exit line. */
#include <string.h>
#include <wslay/wslay.h>

#include "api/ws.h"
#include "fake_server.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct reader {
  const uint8_t *p;
  size_t n, off;
};

static ssize_t read_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user) {
  (void)flags;
  struct reader *r = user;
  size_t left = r->n - r->off, take = left < len ? left : len;
  if (take == 0)
    return wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK), -1;
  memcpy(buf, r->p + r->off, take);
  r->off += take;
  return (ssize_t)take;
}

static ssize_t drop_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user) {
  (void)ctx, (void)data, (void)flags, (void)user;
  return (ssize_t)len;
}

static int mask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user) {
  (void)ctx, (void)user;
  memset(buf, 0x5a, len);
  return 0;
}

static void on_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                       void *user) {
  (void)ctx, (void)user;
  if (arg->opcode == WSLAY_TEXT_FRAME) {
    json_t *j = json_loadb((const char *)arg->msg, arg->msg_length, 0, NULL);
    if (!json_is_object(j))
      fake_fail("a text message from the server that is not a JSON object");
    json_decref(j);
  } else if (arg->opcode == WSLAY_BINARY_FRAME) {
    fake_fail("a binary message from the server");
  }
}

/* The server's bytes, as a client reads them. */
static void check_sent(void) {
  size_t n;
  const uint8_t *raw = fake_raw(&n);
  static const char head[] = "HTTP/1.1 101 Switching Protocols\r\n";
  const uint8_t *end = n ? memmem(raw, n, "\r\n\r\n", 4) : NULL;
  if (fake_status() != 101)
    return; /* refused: no socket */
  if (!end || n < sizeof head - 1 || memcmp(raw, head, sizeof head - 1) != 0)
    fake_fail("a WebSocket that does not begin with its 101");
  struct reader r = {end + 4, n - (size_t)(end + 4 - raw), 0};
  static const struct wslay_event_callbacks cb = {.recv_callback = read_cb,
                                                  .send_callback = drop_cb,
                                                  .genmask_callback = mask_cb,
                                                  .on_msg_recv_callback = on_message};
  wslay_event_context_ptr ctx;
  if (wslay_event_context_client_init(&ctx, &cb, &r) != 0)
    abort();
  if (wslay_event_recv(ctx) != 0 || r.off != r.n)
    fake_fail("frames from the server a client cannot read");
  wslay_event_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t chunk = 1 + data[0], n;
  struct fake_script s;
  const uint8_t *in = fake_split(data + 1, size - 1, &n, &s);
  static const struct http_header h[] = {
      {"Upgrade", "websocket"},
      {"Connection", "keep-alive, Upgrade"},
      {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
      {"Sec-WebSocket-Version", "13"},
  };
  struct fake_req r = {NULL, 0, NULL, h, ARRAY_SIZE(h), DIALECT_HUTCH};
  struct http_conn *c = fake_request(&r, &s);
  api_procs_ws(c, fake_principal());
  void *ctx;
  const struct http_stream_ops *ops;
  for (size_t off = 0; off < n && (ops = fake_ops(&ctx)) && ops->raw; off += chunk)
    ops->raw(ctx, (const char *)in + off, n - off < chunk ? n - off : chunk);
  fake_finish();
  check_sent();
  return 0;
}
