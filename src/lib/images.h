/* The template store (docs/templates.md): templates other than `host`,
 * each a stack of read-only layers plus the config an image carries, kept
 * under STATE/images:
 *
 *   layers/<hex>/        a layer's tree, named by the sha256 of the
 *                        uncompressed tar it was unpacked from (its OCI
 *                        diff_id) or, for a layer hutch made, of the tar
 *                        it exports as. Stored as a snapshot layer is
 *                        (layer.h): ids 0..65535 (others as 65536),
 *                        overlay whiteouts, no setuid or setgid bit.
 *   layers/<hex>.json    {"size": bytes, "files": n, "diff_id": "sha256:..."}
 *   templates/<id>.json  a template's record (below), written whole by
 *                        rename: a half-made template is never listed
 *   templates/<id>.pin   locked shared by every live sandbox made from it
 *   templates/<id>.gone  a removed template whose pin is still held or
 *                        that something holds: its layers stay until the
 *                        last sandbox ends and the last holder lets go
 *   templates/<id>.refs/ one empty file per holder that outlives any
 *                        process (a server's snapshot stacked on it)
 *   cache/<o>/<key>.json a build step's result (the builder's), o the
 *                        sha256 of its owner (images_cache.c)
 *   tmp/<pid>-<n>/       work under way; swept once its process is gone
 *   lock                 flock, exclusive while records or layers change
 *   work.lock            flock, shared by every process working in tmp/
 *   skel/                the mount points under every template's layers
 *
 * A record (jansson object):
 *   {"id": "<16 hex>", "name": "...", "owner": "<tenant>" or "" (public),
 *    "created_at": ms, "source": "import" | "pull" | "build" | "bootstrap",
 *    "ref": what it came from ("docker.io/library/python:3.12", a path),
 *    "layers": ["<hex>", ...]  bottom first, as OCI lists them,
 *    "top": "<hex>"            hutch's own layer above them (hutch_images_add)
 *    "size_bytes": n,          the layers' data
 *    "files": n,               the layers' entries (each an inode on disk)
 *    "config": {"env": ["K=V", ...], "workdir": "/", "user": "",
 *               "entrypoint": [...], "cmd": [...], "labels": {...},
 *               "exposed_ports": ["8080/tcp"], "start_cmd": "", "ready_cmd": "",
 *               "shell": ["/bin/sh", "-c"]},
 *    "tags": ["latest", ...]}
 * Every file here is hutch's own, written by root, in a directory only
 * root may enter; the layers are unpacked from hostile archives by the
 * unpacker (which writes nothing outside the directory it is given). */
#ifndef HUTCH_IMAGES_H
#define HUTCH_IMAGES_H

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

/* Names: a template's, a tag's. What a user types in a URL or a CLI. */
#define HUTCH_IMAGE_NAME_MAX 128
/* The most layers a template has (OCI images rarely pass 100). */
#define HUTCH_IMAGE_MAX_LAYERS 96

struct hutch_images {
  char *dir; /* STATE/images */
  int dirfd;
  int work_lock; /* work.lock held shared once this process works in tmp/ */
};

/* Open (creating if missing, mode 0700) the store under state_dir, and
 * sweep tmp/ of work whose process is gone. */
int hutch_images_open(struct hutch_images *s, const char *state_dir, struct hutch_err *err);
void hutch_images_close(struct hutch_images *s);

/* Whether name is a template name: 1..128 of [a-z0-9._-] (and '/' between
 * parts, as an image reference's path), not "host", starting with a
 * letter or digit. A tag: 1..128 of [A-Za-z0-9._-]. */
bool hutch_images_name_ok(const char *name);
bool hutch_images_tag_ok(const char *tag);

/* The template ref names for owner: "NAME" (its build tagged latest, else
 * its newest), "NAME:TAG" or a build's id; the owner's own first, then a
 * public one. NULL with HUTCH_ERR_NOT_FOUND. owner NULL (the CLI, an
 * admin): a public one first, then anyone's.
 *
 * A template NAME may have several builds, each a record with its own
 * tags; a tag names one build of a NAME at a time (images_write.c moves
 * it), and a build that loses its last tag is removed. */
json_t *hutch_images_find(const struct hutch_images *s, const char *owner, const char *ref,
                          struct hutch_err *err);
/* Template id's record, also when it was removed while in use (.gone):
 * what a sandbox or snapshot made from it stacks. */
json_t *hutch_images_get(const struct hutch_images *s, const char *id, struct hutch_err *err);
/* Split "NAME:TAG" in place: the tag, or NULL when ref has none. */
char *hutch_images_split_tag(char *ref);
/* Every template owner may use (its own and the public ones; NULL: all),
 * sorted by name. */
json_t *hutch_images_list(const struct hutch_images *s, const char *owner);
/* owner's removed templates still kept (a sandbox or a snapshot holds
 * them, their layers with them), unsorted. */
json_t *hutch_images_kept(const struct hutch_images *s, const char *owner);

/* A new empty directory under tmp/ for work under way (malloc'd path). The
 * caller removes it (hutch_layer_remove); if the process dies first, the
 * next hutch_images_open sweeps it. */
char *hutch_images_tmpdir(struct hutch_images *s, struct hutch_err *err);
/* The same for files that never become layers (an upload, a build's
 * context), without the work lock: the lock is held until the process
 * ends, and a server holding it would stop every collection of unused
 * layers for its lifetime (a tenant importing and removing templates
 * would fill the disk). */
char *hutch_images_scratchdir(struct hutch_images *s, struct hutch_err *err);

/* The JSON document of a store's file (a record, a layer's meta, a cache
 * entry) read whole from fd; NULL when fd is -1, the file is not regular,
 * larger than 16 MiB, or not JSON. */
json_t *hutch_images_load_fd(int fd);

/* The store's directory sub, opened to read (not following a link), or
 * NULL. */
DIR *hutch_images_opendir(const struct hutch_images *s, const char *sub);

/* Whether hex is 64 lowercase hex digits (a sha256). */
bool hutch_images_hex_ok(const char *hex);
/* layers/<hex> (malloc'd), and whether it is there. */
char *hutch_images_layer_path(const struct hutch_images *s, const char *hex);
bool hutch_images_layer_exists(const struct hutch_images *s, const char *hex);
/* A number of layer hex's meta: "size" or "files" (0 when it is gone). */
uint64_t hutch_images_layer_meta(const struct hutch_images *s, const char *hex, const char *key);
/* Move staged (a finished layer tree under tmp/) to layers/<hex>, with
 * meta as layers/<hex>.json. When the layer is already there, staged is
 * removed instead: layers are shared. */
int hutch_images_layer_commit(struct hutch_images *s, const char *staged, const char *hex,
                              json_t *meta, struct hutch_err *err);

/* Add record (name, owner, source, ref, layers, config, tags (default
 * [latest]); the rest filled in here) as a new build of its name: every
 * layer must be in the store. Makes hutch's top layer
 * (hosts, hostname, resolv.conf, the mount points a sandbox needs, the
 * user `user` with uid 1000 and /home/user when the image has no uid
 * 1000), assigns the id, and writes the record whole. A tag another
 * build of the name (the owner's) holds moves to the new build when
 * replace is set (a build left with no tag goes; its sandboxes keep
 * theirs), else HUTCH_ERR_CONFLICT. Returns a new reference to the stored
 * record, or NULL. */
json_t *hutch_images_add(struct hutch_images *s, json_t *record, bool replace,
                         struct hutch_err *err);
/* images_top.c, for hutch_images_add: hutch's top layer over layers (an
 * image's, bottom first) committed to the store unless it is there
 * already, and its name, hex. */
int hutch_images_top_layer(struct hutch_images *s, json_t *layers, char hex[65],
                           struct hutch_err *err);
/* Remove owner's template ref (owner NULL: anyone's): NAME every build of
 * it, NAME:TAG that tag (the build goes with its last tag), an id that
 * build; then the template owner's cache entries whose layer none of its
 * templates left holds (the cache lives for its owner's templates), and
 * every layer no template, live sandbox or build cache entry still uses. */
int hutch_images_remove(struct hutch_images *s, const char *owner, const char *ref,
                        struct hutch_err *err);
/* Give the build ref names (owner's own; owner NULL: anyone's) the tags
 * (a JSON array), taking them from the name's other builds; a build left
 * with no tag goes. Take tags from every build of owner's name (not
 * found when none had one). */
int hutch_images_tag(struct hutch_images *s, const char *owner, const char *ref, json_t *tags,
                     struct hutch_err *err);
int hutch_images_untag(struct hutch_images *s, const char *owner, const char *name, json_t *tags,
                       struct hutch_err *err);
/* Remove layers and cache entries nothing uses (hutch_images_remove does). */
int hutch_images_gc(struct hutch_images *s, struct hutch_err *err);

/* Between the store's writers (images_write.c, images_gc.c). The store's
 * lock, exclusive: an fd for the caller to close, or -1. */
int hutch_images_lock(const struct hutch_images *s, struct hutch_err *err);
/* Under the lock: a removed template's record leaves, gone at once when
 * nothing uses it, else kept as templates/<id>.gone (its layers kept)
 * until nothing does. */
int hutch_images_gc_retire(const struct hutch_images *s, const char *id, struct hutch_err *err);
/* Mark in used (a set) the layers a record or a cache entry v names;
 * false when one of them is missing. */
bool hutch_images_gc_mark(json_t *used, json_t *v, const struct hutch_images *s);

/* images_cache.c: the build cache, kept per owner (NULL or "": the
 * public builds'). The most entries one owner keeps. */
#define HUTCH_IMAGES_CACHE_MAX 256
struct hutch_cache_entry {
  char key[65], layer[65];
  uint64_t size, files; /* the layer's, as its meta said when cached */
  int64_t used;         /* its last use, ns since the epoch */
};
/* The layer of owner's step key, if the entry and its layer are there
 * (a use of it). */
bool hutch_images_cache_get(const struct hutch_images *s, const char *owner, const char *key,
                            char hex[65]);
/* Remember layer hex for owner's step key; the owner's least recently
 * used entries past HUTCH_IMAGES_CACHE_MAX go. */
void hutch_images_cache_put(const struct hutch_images *s, const char *owner, const char *key,
                            const char *hex);
/* owner's entries, least recently used first (malloc'd), and their count. */
struct hutch_cache_entry *hutch_images_cache_list(const struct hutch_images *s, const char *owner,
                                                  size_t *n);
void hutch_images_cache_drop(const struct hutch_images *s, const char *owner, const char *key);
/* The store's writers' (images_write.c, images_gc.c, under its lock):
 * mark in used every layer a cache entry names, dropping the entries
 * whose layer is gone; drop owner's entries whose layer held (a set) does
 * not name. */
void hutch_images_cache_keep(const struct hutch_images *s, json_t *used);
void hutch_images_cache_follow(const struct hutch_images *s, const char *owner, json_t *held);

/* What a sandbox made from record mounts: *rootfs, the directory under
 * the layers (mount points only), and *layers, topmost first, as
 * hutch_sandbox_config wants them (malloc'd; free each and the array). */
int hutch_images_stack(const struct hutch_images *s, json_t *record, char **rootfs, char ***layers,
                       size_t *nlayers, struct hutch_err *err);
void hutch_images_stack_free(char *rootfs, char **layers, size_t nlayers);
/* Hold record's layers while a sandbox uses them: an fd locked shared,
 * to close when the sandbox is gone (a server holds one per sandbox). */
int hutch_images_pin(const struct hutch_images *s, json_t *record, struct hutch_err *err);

/* Hold (or, held false, let go of) template id for holder, a name of
 * [A-Za-z0-9_-]: a snapshot of a sandbox made from it keeps its layers
 * when the template is removed. Letting go of what is not held is no
 * error. */
int hutch_images_hold(struct hutch_images *s, const char *id, const char *holder, bool held,
                      struct hutch_err *err);

/* Each template's config applied to a sandbox: environment (template's,
 * then the caller's), working directory, user. */
struct hutch_image_config {
  const char *workdir; /* NULL: the sandbox's default */
  const char *user;    /* NULL: the sandbox's default */
  json_t *env;         /* borrowed: an array of "K=V" */
  /* Its LABEL hutch.isolation: the tier of its sandboxes when a create
   * names none (docs/isolation.md); NULL: none. */
  const char *isolation;
};
void hutch_images_config(json_t *record, struct hutch_image_config *out);

#endif
