/* Reading images as OCI and Docker lay them out on disk: an OCI image
 * layout directory (index.json, blobs/sha256/...), which an oci-archive is
 * a tar of, and a docker-archive (manifest.json, a config and layer tars:
 * what `docker save`, `podman save` and `skopeo copy docker-archive:`
 * write). Every blob is checked against its descriptor's digest and size
 * and each layer's diff_id against the config, the image's config becomes
 * the record's (images.h), and the template is added to the store. */
#ifndef HUTCH_IMAGE_OCI_H
#define HUTCH_IMAGE_OCI_H

#include <jansson.h>

#include "image.h"

#define OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
/* Where a tag's name is, in an index's descriptor. */
#define OCI_REF_NAME "org.opencontainers.image.ref.name"

/* Import the OCI image layout at layout_dir as template name (its image
 * for linux/amd64, when the index lists several), verifying every digest.
 * source and ref go to the record ("import", "pull", ...; what it came
 * from). ctx->replace replaces a template of the same name. Returns the
 * stored record (a new reference), or NULL. */
json_t *oci_import_layout(struct image_ctx *ctx, const char *layout_dir, const char *name,
                          const char *source, const char *ref, struct hutch_err *err);

/* The same for a directory holding a docker-archive's members. */
json_t *oci_import_docker(struct image_ctx *ctx, const char *dir, const char *name,
                          const char *source, const char *ref, struct hutch_err *err);

/* An image config's "config" (OCI's Env, WorkingDir, User, Entrypoint,
 * Cmd, Labels, ExposedPorts) as a record's config, and back. */
json_t *oci_record_config(json_t *image_config, struct hutch_err *err);
json_t *oci_image_config(json_t *record_config);

#endif
