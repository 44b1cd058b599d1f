/* The local terminal of an interactive session: raw mode while the
 * remote terminal has the keys, restored on every way out (the session's
 * end, an error, a signal, a crash), and its size. */
#ifndef HUTCH_TERM_TTY_H
#define HUTCH_TERM_TTY_H

#include <stdbool.h>

/* The server's bounds of a terminal's size (api/ws.c, docs/openapi.yaml). */
#define TERM_TTY_DIM_MAX 9999

/* Put fd (a terminal) in raw mode, its settings saved; -1 (errno) when
 * it is not a terminal. keys: all of it (the keys are the remote
 * terminal's); else only its output (the remote terminal has already
 * turned each newline into CR LF), the keys still signals here. One
 * terminal at a time per process. */
int term_tty_raw(int fd, bool keys);

/* The saved settings back; nothing when none were saved. Safe in a signal
 * handler. */
void term_tty_restore(void);

/* fd's size: false when it is not a terminal or tells none (0 rows or 0
 * columns, as a terminal of unknown size says); else within 1 to
 * TERM_TTY_DIM_MAX each. */
bool term_tty_size(int fd, int *rows, int *cols);

#endif
