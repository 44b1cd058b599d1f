/* Room on the state filesystem. */
#ifndef HUTCH_CORE_DISKROOM_H
#define HUTCH_CORE_DISKROOM_H

#include <stdint.h>

struct http_conn;
struct principal;

/* diskroom.c: 0 when bytes more fit the tenant's disk quota and leave the
 * state filesystem its reserve; else answered (429, 507) and -1. */
int disk_room(struct http_conn *c, const struct principal *p, uint64_t bytes);

#endif
