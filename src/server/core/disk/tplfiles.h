/* Files uploaded for templates: an archive to import, a build context (a
 * tar the native API names by its sha256), E2B's COPY sources (tars E2B's
 * SDK names by its own hash of the files). Kept per tenant under
 * STATE/template-files/<sha256 of the tenant>/, named so that no tenant
 * sees or replaces another's: sha256("<tenant>/<hash>").tar. What a
 * tenant keeps there counts against its disk quota; the oldest go when a
 * new upload needs the room. */
#ifndef HUTCH_CORE_DISK_TPLFILES_H
#define HUTCH_CORE_DISK_TPLFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct server;

/* The most one upload may carry: an image archive, a context. */
#define TEMPLATE_UPLOAD_MAX (8ull << 30)
/* The most uploads one tenant has under way at once (api/templates.c). */
#define TEMPLATE_UPLOADS_TENANT 8

/* A file used or written this recently is never removed to make room: a
 * build may be about to read it. */
#define TEMPLATE_FILES_FRESH_S (15 * 60)

/* The tenant's file of hash (malloc'd), and whether it is there (which
 * counts as a use of it). */
char *tplfiles_path(struct server *srv, const char *tenant, const char *hash);
bool tplfiles_present(struct server *srv, const char *tenant, const char *hash);
/* The bytes of the tenant's files. */
uint64_t tplfiles_bytes(struct server *srv, const char *tenant);
/* The most files a tenant keeps (each quota check lists them). */
#define TEMPLATE_FILES_MAX 1024
/* Remove the tenant's least recently used files (not fresh ones) until
 * need bytes fit in what its quota leaves and one more file fits under
 * TEMPLATE_FILES_MAX, or none is left to remove; -1 (quota_exceeded) when
 * the files are still too many. */
int tplfiles_make_room(struct server *srv, const char *tenant, uint64_t quota_left, uint64_t need,
                       struct hutch_err *err);

/* A streamed upload to a new file in a store tmpdir: pieces written off
 * the loop one at a time, a sha256 of what came, a size cap. */
struct tpl_upload;
/* -1 and err (internal, no_space) if the file cannot be made. */
struct tpl_upload *tplfiles_upload_open(struct server *srv, uint64_t max, struct hutch_err *err);
/* Write n bytes (copied): 0 and written(arg) once they are on disk; -1
 * and err (too_large past max, internal) and the upload is unusable. */
int tplfiles_upload_write(struct tpl_upload *u, const char *data, size_t n,
                          void (*written)(void *arg), void *arg, struct hutch_err *err);
/* 0 if every write made it to the file, else -1 and err (EIO): a file
 * whose last write failed is cut short, and is used for nothing. */
int tplfiles_upload_whole(const struct tpl_upload *u, struct hutch_err *err);
/* What was written: its sha256 (64 hex) and size (UINT64_MAX once a
 * write failed); the file's path and its tmpdir (the upload's, until
 * taken). */
const char *tplfiles_upload_digest(struct tpl_upload *u);
uint64_t tplfiles_upload_size(const struct tpl_upload *u);
const char *tplfiles_upload_path(const struct tpl_upload *u);
/* Give the tmpdir (with the file in it) to the caller, who removes it. */
char *tplfiles_upload_take_dir(struct tpl_upload *u);
/* Move the file to path (the same filesystem): 0, or -1 and err. */
int tplfiles_upload_move(struct tpl_upload *u, const char *path, struct hutch_err *err);
/* Done: closed, and its tmpdir (if not taken) removed off the loop. A
 * write still under way finishes first. */
void tplfiles_upload_close(struct tpl_upload *u);

#endif
