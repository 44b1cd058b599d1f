/* The CLI's WebSocket client: the accept value a key asks for (RFC 6455's
 * own example), the upgrade's answer as the client checks it, and whole
 * connections to a fake server on loopback: a refusal, a wrong accept, a
 * head that never ends, and a session (frames in the answer's packet,
 * fragments, a masked frame from the client, the close). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "digest.h"
#include "tap.h"
#include "term_ws.h"

enum mode { REFUSE, BAD_ACCEPT, ENDLESS_HEAD, SESSION };

struct fake {
  int lfd;
  enum mode mode;
  char got[64]; /* what the client sent, unmasked (SESSION) */
};

/* The request's head read, its Sec-WebSocket-Key into key. */
static void read_head(int fd, char key[32]) {
  char buf[4096];
  size_t n = 0;
  while (n < sizeof buf - 1 && !memmem(buf, n, "\r\n\r\n", 4)) {
    ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
    if (r <= 0)
      break;
    n += (size_t)r;
  }
  buf[n] = '\0';
  const char *k = strstr(buf, "Sec-WebSocket-Key: ");
  key[0] = '\0';
  if (k)
    sscanf(k + 19, "%31[^\r]", key);
}

static void send_str(int fd, const char *s, size_t n) {
  if (write(fd, s, n) != (ssize_t)n)
    abort();
}

/* A masked frame from the client, unmasked into got (small ones only). */
static void read_frame(int fd, char *got, size_t cap) {
  unsigned char h[6], data[64];
  if (read(fd, h, 6) != 6 || (h[1] & 0x7f) >= sizeof data)
    return;
  size_t len = h[1] & 0x7f;
  if (read(fd, data, len) != (ssize_t)len)
    return;
  for (size_t i = 0; i < len && i < cap - 1; i++)
    got[i] = (char)(data[i] ^ h[2 + i % 4]);
  got[len < cap ? len : cap - 1] = '\0';
}

static void *serve(void *arg) {
  struct fake *f = arg;
  int fd = accept(f->lfd, NULL, NULL);
  char key[32], accept_v[32], head[512];
  read_head(fd, key);
  digest_ws_accept(key, accept_v);
  if (f->mode == REFUSE) {
    const char *body = "{\"error\":{\"code\":\"not_found\",\"message\":\"no sandbox x\"}}";
    int n = snprintf(head, sizeof head, "HTTP/1.1 404 Not Found\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    send_str(fd, head, (size_t)n);
  } else if (f->mode == BAD_ACCEPT) {
    const char *h =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n";
    send_str(fd, h, strlen(h));
  } else if (f->mode == ENDLESS_HEAD) {
    char junk[1024];
    memset(junk, 'x', sizeof junk);
    send_str(fd, "HTTP/1.1 101 X\r\nX-Junk: ", 24);
    for (int i = 0; i < 20; i++)
      send_str(fd, junk, sizeof junk);
  } else {
    /* The answer and the first frames in one write: the client must keep
     * what came after the head. Then a message in two fragments, the
     * client's frame read, and a close. */
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                     "\x81\x05hello",
                     accept_v);
    send_str(fd, head, (size_t)n);
    send_str(fd, "\x01\x02" "ab", 4);
    send_str(fd,
             "\x80\x01"
             "c",
             3);
    read_frame(fd, f->got, sizeof f->got);
    send_str(fd, "\x88\x02\x03\xe8", 4);
  }
  shutdown(fd, SHUT_WR);
  char drain[256];
  while (read(fd, drain, sizeof drain) > 0)
    ;
  close(fd);
  return NULL;
}

struct seen {
  char text[64];
  int n;
};

static void on_msg(void *arg, bool text, const uint8_t *data, size_t n) {
  struct seen *s = arg;
  if (text && n < 16) {
    strncat(s->text, (const char *)data, n);
    strcat(s->text, "|");
  }
  s->n++;
}

/* One connection to a fake server in mode; its ws (NULL: err). */
static struct term_ws *connect_fake(enum mode mode, struct fake *f, pthread_t *t,
                                    struct term_ws_err *err) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  f->lfd = socket(AF_INET, SOCK_STREAM, 0);
  f->mode = mode;
  f->got[0] = '\0';
  if (bind(f->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(f->lfd, 1) < 0 ||
      getsockname(f->lfd, (struct sockaddr *)&a, &alen) < 0)
    abort();
  pthread_create(t, NULL, serve, f);
  struct hc_client c = {.key = "hk_test", .loopback = true};
  snprintf(c.url, sizeof c.url, "http://127.0.0.1:%d", ntohs(a.sin_port));
  return term_ws_open(&c, "/v1/sandboxes/x/exec/1/ws", err);
}

static void end_fake(struct fake *f, pthread_t t) {
  pthread_join(t, NULL);
  close(f->lfd);
}

static void connections(void) {
  struct fake f;
  pthread_t t;
  struct term_ws_err err;

  ok(!connect_fake(REFUSE, &f, &t, &err), "a refusal is no connection");
  end_fake(&f, t);
  is_int((int)err.status, 404, "... its status");
  is_str(err.code, "not_found", "... its error's code");
  is_str(err.message, "no sandbox x", "... and message");

  ok(!connect_fake(BAD_ACCEPT, &f, &t, &err), "a wrong accept is no connection");
  end_fake(&f, t);
  is_int((int)err.status, 101, "... though a 101");

  ok(!connect_fake(ENDLESS_HEAD, &f, &t, &err), "a head past the bound is no connection");
  end_fake(&f, t);

  struct term_ws *ws = connect_fake(SESSION, &f, &t, &err);
  ok(ws != NULL, "an upgrade: a connection (%s)", err.message);
  if (!ws)
    return;
  term_ws_queue(ws, true, "ping", 4);
  struct seen s = {{0}, 0};
  int r = 0;
  while (r == 0) {
    term_ws_flush(ws);
    struct pollfd p = {.fd = term_ws_fd(ws), .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0)
      break;
    r = term_ws_read(ws, on_msg, &s);
  }
  is_int(r, 1, "the server's close ends it");
  is_str(s.text, "hello|abc|",
         "the messages, the first from the answer's packet, fragments joined");
  term_ws_close(ws);
  end_fake(&f, t);
  is_str(f.got, "ping", "the client's frame is masked, and unmasks to what was sent");
}

static int check(const char *head, long *status) {
  char accept[32];
  digest_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", accept);
  return term_ws_check_head(head, strlen(head), accept, status);
}

int main(void) {
  char accept[32];
  long status;
  digest_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", accept);
  is_str(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "RFC 6455's example key");

  const char *good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
  is_int(check(good, &status), 0, "a 101 upgrading with the right accept");
  is_int((int)status, 101, "its status");

  const char *cased = "HTTP/1.1 101 OK\r\nupgrade:WebSocket\r\nconnection: keep-alive, upgrade\r\n"
                      "sec-websocket-accept:  s3pPLMBiTxaQ9kYGzzhZRbK+xOo=  \r\n";
  is_int(check(cased, &status), 0, "names in any case, values padded, a token list");

  const char *wrong = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=";
  is_int(check(wrong, &status), -1, "a wrong accept is refused");

  const char *no_upgrade = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
  is_int(check(no_upgrade, &status), -1, "no Upgrade header is refused");

  is_int(check("HTTP/1.1 404 Not Found\r\nContent-Length: 2", &status), -1, "a 404");
  is_int((int)status, 404, "... its status kept, to say the refusal");

  is_int(check("HTTP/1.1 1x1 what", &status), -1, "a status that is no number");
  is_int((int)status, 0, "... no status");
  is_int(check("SSH-2.0-OpenSSH", &status), -1, "not HTTP");
  is_int(check("", &status), -1, "nothing");

  char huge[600];
  memset(huge, 'a', sizeof huge);
  memcpy(huge, "HTTP/1.1 101 X\r\nUpgrade: ", 26);
  huge[sizeof huge - 1] = '\0';
  is_int(check(huge, &status), -1, "a header value too long to hold is refused");

  connections();
  return done_testing();
}
