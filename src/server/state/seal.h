/* Values the state store keeps sealed: AES-256-GCM under the server's state
 * key (STATE_DIR/state.key, keys.c). A sealed value is "s1:" and the hex of
 * nonce, ciphertext and tag; the associated data binds it to its row (the
 * store passes the sandbox's id), so a sealed value moved elsewhere in the
 * database opens nowhere. */
#ifndef HUTCH_SEAL_H
#define HUTCH_SEAL_H

#include <stdbool.h>

#define SEAL_KEY_LEN 32

/* The sealed text of plain (malloc'd). */
char *seal_text(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *plain);
/* The plain text (malloc'd), or NULL when sealed was not sealed under this
 * key and aad, or was altered. */
char *seal_open(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *sealed);

#endif
