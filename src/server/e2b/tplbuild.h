/* E2B's template build spec as a Dockerfile (tplbuild.c). */
#ifndef HUTCH_E2B_TPLBUILD_H
#define HUTCH_E2B_TPLBUILD_H

#include <jansson.h>

struct hutch_err;

/* A build spec as a Dockerfile (malloc'd), base_user the base's user
 * (USER goes back to it after a RUN as another); the COPY steps' file
 * hashes appended to hashes. NULL and err when it cannot be. */
char *e2b_dockerfile(json_t *spec, const char *base_user, json_t *hashes, struct hutch_err *err);

#endif
