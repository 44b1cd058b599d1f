/* The local terminal (term_tty.h). The saved settings live in this file's
 * statics (a one-shot CLI, one terminal per process) so that an exit from
 * anywhere (atexit) and a crash's signal handler can put them back: a
 * user must never be left with a terminal that echoes nothing. The
 * signals a user sends to end a session (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT) are the session's to take (shell.c's signalfd), which restores
 * the terminal on its way out. */
#include "term_tty.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved;
static int saved_fd = -1;

void term_tty_restore(void) {
  if (saved_fd < 0)
    return;
  while (tcsetattr(saved_fd, TCSADRAIN, &saved) < 0 && errno == EINTR)
    ;
  saved_fd = -1;
}

/* A crash: the terminal back, then the default action (a core dump). */
static void on_crash(int sig) {
  term_tty_restore();
  raise(sig); /* SA_RESETHAND made the handler the default again */
}

static void restore_on_crash(void) {
  static const int crashes[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof crashes / sizeof crashes[0]; i++)
    sigaction(crashes[i], &sa, NULL);
}

int term_tty_raw(int fd, bool keys) {
  static bool hooked;
  struct termios t;
  if (!isatty(fd) || tcgetattr(fd, &t) < 0)
    return -1;
  if (!hooked) {
    atexit(term_tty_restore);
    restore_on_crash();
    hooked = true;
  }
  saved = t;
  saved_fd = fd;
  if (keys)
    cfmakeraw(&t);
  else
    t.c_oflag &= ~(tcflag_t)OPOST;
  while (tcsetattr(fd, TCSADRAIN, &t) < 0) {
    if (errno != EINTR) {
      saved_fd = -1;
      return -1;
    }
  }
  return 0;
}

bool term_tty_size(int fd, int *rows, int *cols) {
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
    return false;
  *rows = ws.ws_row > TERM_TTY_DIM_MAX ? TERM_TTY_DIM_MAX : ws.ws_row;
  *cols = ws.ws_col > TERM_TTY_DIM_MAX ? TERM_TTY_DIM_MAX : ws.ws_col;
  return true;
}
