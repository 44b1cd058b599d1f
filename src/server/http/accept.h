/* The listening socket (accept.c): listening, accepting by hand with a
 * spare descriptor for answering 503 when out of descriptors, and closing. */
#ifndef HUTCH_HTTP_ACCEPT_H
#define HUTCH_HTTP_ACCEPT_H

#include <sys/socket.h>

struct http_server;
struct hutch_err;

/* Listen on sa, accepting by hand (a 503 when out of descriptors); stop
 * listening. */
int http_accept_start(struct http_server *hs, const struct sockaddr *sa, socklen_t len,
                      struct hutch_err *err);
void http_accept_stop(struct http_server *hs);
/* The listening socket's and the spare's descriptors closed (after the loop). */
void http_accept_close(struct http_server *hs);

#endif
