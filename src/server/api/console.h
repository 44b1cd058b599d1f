/* The web console (console.c): its files found at start, and served at
 * /ui with a strict Content-Security-Policy. */
#ifndef HUTCH_API_CONSOLE_H
#define HUTCH_API_CONSOLE_H

struct server;
struct http_conn;
struct principal;
struct hutch_err;

/* The console's directories into srv->console (left NULL under --no-ui or
 * when none is found, which is said on stderr); -1 only for a --ui-dir
 * that holds no console. */
int api_console_open(struct server *srv, struct hutch_err *err);
void api_console_close(struct server *srv);

/* GET /ui and /ui/{path} (routes.c). */
void api_console_file(struct http_conn *c, const struct principal *p);

#endif
