/* A tenant's sandboxes as its lists show them (sbx_list.h): its own, through
 * its tally, filtered and newest first. */
#include "core/sandbox/sbx_list.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "core/sandbox/sbx.h"
#include "core/sandbox/tally.h"

static bool metadata_match(const struct sbx *sb, json_t *want) {
  const char *k;
  json_t *v;
  json_object_foreach(want, k, v) {
    json_t *have = json_object_get(sb->metadata, k);
    if (!have || !json_equal(have, v))
      return false;
  }
  return true;
}

static int newer_first(const void *a, const void *b) {
  const struct sbx *x = *(struct sbx *const *)a, *y = *(struct sbx *const *)b;
  if (x->created_ms != y->created_ms)
    return x->created_ms > y->created_ms ? -1 : 1;
  return strcmp(x->id, y->id);
}

struct sbx **sbx_list(struct server *srv, const struct principal *p, const struct sbx_filter *f,
                      size_t *n) {
  const struct tally *t = tally_of(srv, p->tenant);
  struct sbx **all = xcalloc((t ? t->sandboxes : 0) + 1, sizeof *all);
  *n = 0;
  for (struct sbx *sb = t ? t->listed : NULL; sb; sb = sb->tenant_next)
    if ((sb->paused ? f->paused : f->running) &&
        (!f->metadata || metadata_match(sb, f->metadata)) &&
        (!f->template || strcmp(f->template, sb->template) == 0) &&
        sb->created_ms >= f->started_after_ms)
      all[(*n)++] = sb;
  qsort(all, *n, sizeof *all, newer_first);
  return all;
}
