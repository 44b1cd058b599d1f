/* What the host must offer hutch, checked one capability at a time: hutch
 * doctor prints them all; hutch run and hutch serve ask for the first that
 * fails once a sandbox could not be made (docs/doctor.md). Each check
 * reports what it found and, when that is not enough, what to do. */
#ifndef HUTCH_HOSTCHECK_H
#define HUTCH_HOSTCHECK_H

#include <stdbool.h>
#include <stddef.h>

enum hutch_check_status {
  HUTCH_CHECK_OK,
  HUTCH_CHECK_MISSING, /* the kernel or the host lacks it */
  HUTCH_CHECK_REFUSED, /* it is there, but this process may not use it */
  HUTCH_CHECK_WARN,    /* hutch runs, with less than it could */
};

struct hutch_check {
  const char *name;
  bool optional; /* hutch runs without it (a VM backend, snapshots) */
  enum hutch_check_status status;
  char detail[384];
  char remedy[256]; /* empty when there is nothing to do */
};

#define HUTCH_CHECK_MAX 16

/* Run every check, in order; returns how many filled out[]. state_dir is
 * where hutch keeps its state: the id-mapped mount check probes its
 * filesystem (its nearest existing parent when it does not exist yet). */
size_t hutch_host_check_all(const char *state_dir, struct hutch_check *out);
/* Whether a check's result keeps hutch from making sandboxes. */
bool hutch_check_fails(const struct hutch_check *c);
const char *hutch_check_status_name(enum hutch_check_status s);

/* Run the checks hutch needs until one fails, and write that cause as one
 * line, "cannot make a sandbox: CAUSE; to fix: REMEDY; see hutch doctor". false
 * when every needed check passes. */
bool hutch_host_diagnose(const char *state_dir, char *line, size_t size);

/* The user namespace check (hostcheck_userns.c): can this process make
 * one, and if not, why not. */
void hutch_check_userns(const char *state_dir, struct hutch_check *c);
/* Fill a check's result: the remedy (NULL: none) and the detail. */
void hutch_check_say(struct hutch_check *c, enum hutch_check_status s, const char *remedy,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
