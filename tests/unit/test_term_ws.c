/* The CLI's WebSocket client: the accept value a key asks for (RFC 6455's
 * own example), and the upgrade's answer as the client checks it. */
#include "digest.h"
#include "tap.h"
#include "term_ws.h"

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
  return done_testing();
}
