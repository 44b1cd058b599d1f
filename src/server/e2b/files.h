/* envd's GET and POST /files (files.c): downloads, and uploads plain,
 * gzip or multipart. */
#ifndef HUTCH_E2B_FILES_H
#define HUTCH_E2B_FILES_H

struct http_conn;
struct principal;

/* Route handlers (routes.c). */
void e2b_files_read(struct http_conn *c, const struct principal *p);
void e2b_files_write(struct http_conn *c, const struct principal *p);

#endif
