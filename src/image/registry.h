/* A client of OCI distribution registries (HTTP API v2) on libcurl:
 * image references, manifests, blobs, anonymous / basic / bearer-token
 * auth, and the limits that keep a hostile registry from hurting the
 * host (timeouts, sizes, where a connection may go: registry.c). */
#ifndef HUTCH_REGISTRY_H
#define HUTCH_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "err.h"

/* An image reference, normalized as Docker does: "busybox" is
 * docker.io/library/busybox:latest, fetched from registry-1.docker.io. */
struct registry_ref {
  char host[262];      /* "registry-1.docker.io", "127.0.0.1:5000", "[::1]:5000" */
  char name[256];      /* the repository: "library/busybox" */
  char tag[129];       /* "" when only a digest was given */
  char digest[72];     /* "sha256:<64 hex>" or "" */
  char canonical[720]; /* "docker.io/library/busybox:latest", "...@sha256:..." */
  bool loopback;       /* host is 127.0.0.0/8, ::1 or localhost */
};
/* Parse s (REGISTRY/NAME:TAG, NAME@sha256:HEX, a Docker Hub short name). */
int registry_ref_parse(const char *s, struct registry_ref *out, struct hutch_err *err);

/* Where a connection may go. A registry on loopback may reach loopback
 * only; any other may reach public addresses, and private ones too
 * (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) with allow_private.
 * Never link-local (169.254/16: cloud metadata; fe80::/10), unspecified,
 * multicast or reserved addresses. */
enum registry_scope { REGISTRY_SCOPE_LOOPBACK, REGISTRY_SCOPE_PUBLIC, REGISTRY_SCOPE_PRIVATE };
bool registry_addr_allowed(enum registry_scope scope, const struct sockaddr *sa);

struct registry_opts {
  bool insecure;          /* plain http (only for a loopback registry) */
  bool allow_private;     /* see registry_scope */
  const char *user;       /* "USER:PASSWORD" or NULL: anonymous */
  uint64_t max_bytes;     /* every body of the pull together */
  long low_speed_seconds; /* fail when under 1 KiB/s this long */
};

struct registry;
/* A client for ref's registry. Refuses --insecure for a registry not on
 * loopback before any connection. */
struct registry *registry_open(const struct registry_ref *ref, const struct registry_opts *opts,
                               struct hutch_err *err);
void registry_close(struct registry *r);

/* The image manifest ref names for linux/amd64: when the reference
 * (tag or digest) names an index or a Docker manifest list, the entry
 * for linux/amd64 in it. *body is the manifest's bytes (malloc'd, as
 * served, its digest verified when one was known), *media its media
 * type, digest "sha256:..." of body. Returns the parsed manifest. */
struct registry_manifest {
  char *body;
  size_t len;
  char media[128];
  char digest[72];
};
json_t *registry_get_manifest(struct registry *r, struct registry_manifest *out,
                              struct hutch_err *err);

/* Download blob digest ("sha256:<hex>", size bytes) to fd, verifying
 * size and digest as it comes; progress(arg, done, size) now and then. */
typedef void (*registry_progress_fn)(void *arg, uint64_t done, uint64_t size);
int registry_get_blob(struct registry *r, const char *digest, uint64_t size, int fd,
                      registry_progress_fn progress, void *arg, struct hutch_err *err);

#endif
