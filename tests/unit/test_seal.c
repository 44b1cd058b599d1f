/* Sealing of the state store's tokens and secrets (src/server/seal.c): what
 * is sealed opens under its key and row only, and any change to it, or a
 * value that was never sealed, opens to nothing. */
#include <stdlib.h>
#include <string.h>

#include "state/seal.h"
#include "tap.h"

int main(void) {
  unsigned char key[SEAL_KEY_LEN], other[SEAL_KEY_LEN];
  for (size_t i = 0; i < SEAL_KEY_LEN; i++) {
    key[i] = (unsigned char)i;
    other[i] = (unsigned char)(i + 1);
  }
  const char *plain = "{\"token\":\"2154bdddd4696b083798a7d595fc732c02c5c755\"}";
  char *a = seal_text(key, "hutch sandbox a", plain);
  char *b = seal_text(key, "hutch sandbox a", plain);
  ok(strncmp(a, "s1:", 3) == 0 && !strstr(a, "2154bddd"), "sealed text hides the value: %s", a);
  ok(strcmp(a, b) != 0, "each sealing has a nonce of its own");
  char *back = seal_open(key, "hutch sandbox a", a);
  is_str(back ? back : "(null)", plain, "opens under its key and row");
  free(back);
  ok(!seal_open(other, "hutch sandbox a", a), "not under another key");
  ok(!seal_open(key, "hutch sandbox b", a), "not as another row's");
  size_t n = strlen(a);
  for (size_t i = 3; i < n; i += 7) {
    char saved = a[i];
    a[i] = saved == '0' ? '1' : '0';
    if (seal_open(key, "hutch sandbox a", a)) {
      ok(false, "a change at %zu opens", i);
      break;
    }
    a[i] = saved;
  }
  ok(true, "no one-digit change opens");
  a[n - 2] = '\0';
  ok(!seal_open(key, "hutch sandbox a", a), "cut short: nothing");
  ok(!seal_open(key, "hutch sandbox a", plain), "a value never sealed: nothing");
  ok(!seal_open(key, "hutch sandbox a", "s1:zz"), "not hex: nothing");
  ok(!seal_open(key, "hutch sandbox a", "s1:"), "empty: nothing");
  char *empty = seal_text(key, "x", "");
  back = seal_open(key, "x", empty);
  is_str(back ? back : "(null)", "", "the empty string round-trips");
  free(back);
  free(empty);
  free(a);
  free(b);
  return done_testing();
}
