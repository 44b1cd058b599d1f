/* The template store (src/lib/images*.c): layers committed
 * and shared, templates added with hutch's top layer, found by name, tag
 * and id, owners kept apart, pins keeping a removed template's layers,
 * and collection of what nothing uses. Needs root (it owns files as other
 * ids and sets trusted.* attributes, as the store does). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "images.h"
#include "layer.h"
#include "msg.h"
#include "tap.h"
#include "util.h"

static char *state;

/* A staged layer holding one file name with text, committed as hex. */
static void make_layer(struct hutch_images *s, const char *hex, const char *name,
                       const char *text) {
  struct hutch_err err = {0};
  char *dir = hutch_images_tmpdir(s, &err);
  int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY) : -1;
  if (fd >= 0 && strchr(name, '/')) {
    char *parent = xstrdup(name);
    *strrchr(parent, '/') = '\0';
    mkdirat(fd, parent, 0755);
    free(parent);
  }
  ok(fd >= 0 && create_file_at(fd, name, text, 0644, &err) == 0, "layer %.6s staged", hex);
  json_t *meta = json_pack("{s:i,s:i}", "size", (int)strlen(text), "files", 1);
  ok(hutch_images_layer_commit(s, dir, hex, meta, &err) == 0, "layer %.6s committed: %s", hex,
     err.msg);
  json_decref(meta);
  close(fd);
  free(dir);
}

static json_t *record(const char *name, const char *owner, const char *hex) {
  return json_pack("{s:s,s:s,s:s,s:s,s:[s],s:{s:[s],s:s,s:s}}", "name", name, "owner", owner,
                   "source", "import", "ref", "test", "layers", hex, "config", "env", "PATH=/bin",
                   "workdir", "/work", "user", "1000");
}

static bool exists(const char *rel) {
  struct stat st;
  char *p = xasprintf("%s/images/%s", state, rel);
  bool r = lstat(p, &st) == 0;
  free(p);
  return r;
}

int main(void) {
  char tmpl[] = "/tmp/test_images.XXXXXX";
  if (geteuid() != 0) {
    printf("1..0 # SKIP needs root: the store owns files as the sandboxes' ids\n");
    return getenv("HUTCH_MUST_WORK") ? 1 : 0;
  }
  state = mkdtemp(tmpl);
  struct hutch_images s;
  struct hutch_err err = {0};
  ok(state && hutch_images_open(&s, state, &err) == 0, "store opens: %s", err.msg);

  ok(hutch_images_name_ok("python") && hutch_images_name_ok("org/py-3.12"), "names taken");
  ok(!hutch_images_name_ok("host") && !hutch_images_name_ok("../x") &&
         !hutch_images_name_ok("a//b") && !hutch_images_name_ok("A") &&
         !hutch_images_name_ok("-x") && !hutch_images_name_ok(""),
     "host, .., empty parts, capitals and options refused as names");
  ok(hutch_user_ok("user") && hutch_user_ok("node") && hutch_user_ok("1000:1000") &&
         !hutch_user_ok("65536") && !hutch_user_ok("0x1") && !hutch_user_ok("a b") &&
         !hutch_user_ok("1000:") && !hutch_user_ok("-1"),
     "users: names and ids below 65536 only");

  const char *a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  const char *b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
  make_layer(&s, a, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
  make_layer(&s, a, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"); /* again: shared */
  make_layer(&s, b, "etc/passwd",
             "root:x:0:0::/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n");
  ok(hutch_images_layer_exists(&s, a) && !hutch_images_layer_exists(&s, "zz"),
     "a committed layer is there, a bad name is not");

  json_t *r = record("py", "", a);
  json_t *one = hutch_images_add(&s, r, false, &err);
  ok(one != NULL, "template added: %s", err.msg);
  ok(json_array_size(json_object_get(one, "layers")) == 1, "stored with its layer");
  json_t *twice = json_pack("{s:s,s:s,s:[s,s]}", "name", "twice", "owner", "", "layers", a, a);
  json_t *tw = hutch_images_add(&s, twice, false, &err);
  ok(tw && json_array_size(json_object_get(tw, "layers")) == 1,
     "a layer listed twice is stacked once (overlayfs refuses it twice)");
  ok(hutch_images_remove(&s, NULL, "twice", &err) == 0, "removed");
  json_decref(tw);
  json_decref(twice);
  json_t *again = hutch_images_add(&s, r, false, &err);
  ok(!again && err.kind == HUTCH_ERR_CONFLICT, "the same name again is a conflict");
  json_decref(r);

  /* hutch's top layer: uid 1000 added, as the image has none. */
  const char *top = json_string_value(json_object_get(one, "top"));
  char *passwd = xasprintf("layers/%s/etc/passwd", top ? top : "");
  int dfd = open(s.dir, O_RDONLY | O_DIRECTORY);
  char buf[512] = {0};
  read_file_at(dfd, passwd, buf, sizeof buf - 1, &err);
  ok(strstr(buf, "root:x:0:0") && strstr(buf, "user:x:1000:1000:user:/home/user"),
     "the top layer adds user 1000 to the image's passwd");
  free(passwd);
  char *resolv = xasprintf("layers/%s/etc/resolv.conf", top);
  ok(exists(resolv), "the top layer has resolv.conf");
  free(resolv);

  json_t *r2 = record("node", "", b);
  json_t *two = hutch_images_add(&s, r2, false, &err);
  json_decref(r2);
  const char *top2 = json_string_value(json_object_get(two, "top"));
  char *home = xasprintf("layers/%s/home/user", top2 ? top2 : "");
  ok(two && !exists(home), "an image with uid 1000 gets no second one");
  free(home);

  /* An image whose /etc is a link to the host's: the top layer reads
   * nothing through it. */
  const char *c = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
  char *cdir = hutch_images_tmpdir(&s, &err);
  char *link = cdir ? xasprintf("%s/etc", cdir) : NULL;
  ok(link && symlink("/etc", link) == 0, "a layer with etc -> /etc");
  free(link);
  json_t *cmeta = json_pack("{s:i}", "size", 0);
  hutch_images_layer_commit(&s, cdir, c, cmeta, &err);
  json_decref(cmeta);
  free(cdir);
  json_t *rc = record("linked", "", c);
  json_t *linked = hutch_images_add(&s, rc, false, &err);
  json_decref(rc);
  const char *ctop = json_string_value(json_object_get(linked, "top"));
  char *cp = xasprintf("layers/%s/etc/passwd", ctop ? ctop : "");
  char cbuf[4096] = {0};
  read_file_at(dfd, cp, cbuf, sizeof cbuf - 1, &err);
  ok(linked && strstr(cbuf, "user:x:1000") && !strstr(cbuf, "daemon:") && !strstr(cbuf, "_apt"),
     "the host's /etc/passwd is not read through an image's link");
  free(cp);
  ok(hutch_images_remove(&s, NULL, "linked", &err) == 0, "removed");
  json_decref(linked);

  json_t *mine = record("py", "tenant-a", b);
  json_t *m = hutch_images_add(&s, mine, false, &err);
  ok(m != NULL, "another owner's template of the same name: %s", err.msg);
  json_decref(mine);

  json_t *f = hutch_images_find(&s, "tenant-a", "py", &err);
  ok(f && strcmp(json_string_value(json_object_get(f, "owner")), "tenant-a") == 0,
     "an owner finds its own first");
  json_decref(f);
  f = hutch_images_find(&s, "tenant-b", "py:latest", &err);
  ok(f && strcmp(json_string_value(json_object_get(f, "owner")), "") == 0,
     "another finds the public one, by tag");
  json_decref(f);
  f = hutch_images_find(&s, "tenant-b", "py:nope", &err);
  ok(!f && err.kind == HUTCH_ERR_NOT_FOUND, "an unknown tag is not found");
  f = hutch_images_find(&s, "tenant-b", json_string_value(json_object_get(m, "id")), &err);
  ok(!f, "another owner's template is not found by its id");
  json_t *all = hutch_images_list(&s, "tenant-b");
  ok(json_array_size(all) == 2, "a tenant lists the public templates only (%zu)",
     json_array_size(all));
  json_decref(all);

  char *rootfs, **layers;
  size_t n;
  ok(hutch_images_stack(&s, one, &rootfs, &layers, &n, &err) == 0 && n == 2 &&
         strstr(layers[0], top) && strstr(layers[1], a),
     "the stack: top layer first, then the image's");
  hutch_images_stack_free(rootfs, layers, n);
  struct hutch_image_config ic;
  hutch_images_config(one, &ic);
  ok(ic.workdir && strcmp(ic.workdir, "/work") == 0 && ic.user && json_array_size(ic.env) == 1,
     "the config: workdir, user, env");

  ok(hutch_images_remove(&s, "tenant-b", "py", &err) < 0 && err.kind == HUTCH_ERR_FORBIDDEN,
     "a tenant cannot remove a public template");
  int pin = hutch_images_pin(&s, one, &err);
  ok(pin >= 0, "pinned");
  char *jname = xasprintf("templates/%s.json", json_string_value(json_object_get(one, "id")));
  char *gname = xasprintf("templates/%s.gone", json_string_value(json_object_get(one, "id")));
  /* The work lock of this process would keep every layer: let it go. */
  close(s.work_lock);
  s.work_lock = -1;
  ok(hutch_images_remove(&s, NULL, "py", &err) == 0 && !exists(jname) && exists(gname),
     "a removed template still pinned is kept as gone");
  char *la = xasprintf("layers/%s", a);
  ok(exists(la), "its layer stays while pinned");
  close(pin);
  ok(hutch_images_gc(&s, &err) == 0 && !exists(gname) && !exists(la),
     "once unpinned, the collection removes it and its layer");
  char *pname = xasprintf("templates/%s.pin", json_string_value(json_object_get(one, "id")));
  ok(hutch_images_pin(&s, one, &err) < 0 && err.kind == HUTCH_ERR_NOT_FOUND && !exists(pname),
     "a record read before its removal pins nothing (its layers are gone)");
  char *rname = xasprintf("templates/%s.refs", json_string_value(json_object_get(one, "id")));
  ok(hutch_images_hold(&s, json_string_value(json_object_get(one, "id")), "snap_0", true, &err) <
             0 &&
         err.kind == HUTCH_ERR_NOT_FOUND && !exists(rname),
     "a removed template is not held");
  free(rname);
  free(pname);
  char *lb = xasprintf("layers/%s", b);
  ok(exists(lb), "a layer two templates share stays");
  ok(hutch_images_remove(&s, "tenant-a", "py", &err) == 0 && exists(lb),
     "removing one sharer keeps the layer for the other");
  const char *nid = json_string_value(json_object_get(two, "id"));
  ok(hutch_images_hold(&s, nid, "snap_1", true, &err) == 0, "held by a snapshot: %s", err.msg);
  ok(hutch_images_remove(&s, NULL, "node", &err) == 0 && exists(lb),
     "a held template's layer stays when it is removed");
  json_t *got = hutch_images_get(&s, nid, &err);
  ok(got != NULL, "a removed template still held is got by its id");
  json_decref(got);
  ok(hutch_images_hold(&s, nid, "snap_1", false, &err) == 0 && hutch_images_gc(&s, &err) == 0 &&
         !exists(lb),
     "let go of, the collection takes it");
  got = hutch_images_get(&s, nid, &err);
  ok(!got && err.kind == HUTCH_ERR_NOT_FOUND, "and its record");
  ok(hutch_images_remove(&s, NULL, "node", &err) < 0 && err.kind == HUTCH_ERR_NOT_FOUND,
     "removing again: not found");
  /* Builds and tags: tg:v1 beside tg:latest; a tag moves; a build that
   * loses its last tag goes; NAME is its latest, NAME:TAG that build. */
  const char *d = "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
  make_layer(&s, d, "etc/passwd", "root:x:0:0::/root:/bin/sh\n");
  close(s.work_lock); /* layers committed: let the collections below work */
  s.work_lock = -1;
  json_t *t0 = json_pack("{s:s,s:s,s:[s]}", "name", "tg", "owner", "", "layers", d);
  json_t *v1 = json_pack("{s:s,s:s,s:[s],s:[s,s]}", "name", "tg", "owner", "", "layers", d, "tags",
                         "v1", "stable");
  json_t *b0 = hutch_images_add(&s, t0, false, &err);
  json_t *b1 = hutch_images_add(&s, v1, false, &err);
  ok(b0 && b1, "tg:v1 beside tg:latest: %s", err.msg);
  json_t *t = hutch_images_find(&s, NULL, "tg", &err);
  ok(t && json_equal(json_object_get(t, "id"), json_object_get(b0, "id")),
     "tg is the build tagged latest");
  json_decref(t);
  t = hutch_images_find(&s, NULL, "tg:stable", &err);
  ok(t && json_equal(json_object_get(t, "id"), json_object_get(b1, "id")), "tg:stable the other");
  json_decref(t);
  ok(!hutch_images_add(&s, v1, false, &err) && err.kind == HUTCH_ERR_CONFLICT &&
         strstr(err.msg, "tg:v1"),
     "a tag taken is a conflict without replace: %s", err.msg);
  json_t *lt = json_pack("[s]", "latest"), *st = json_pack("[s]", "stable");
  ok(hutch_images_tag(&s, NULL, "tg:v1", lt, &err) == 0, "latest moved to tg:v1: %s", err.msg);
  t = hutch_images_find(&s, NULL, "tg", &err);
  ok(t && json_equal(json_object_get(t, "id"), json_object_get(b1, "id")), "tg is that build now");
  json_decref(t);
  char *b0name = xasprintf("templates/%s.json", json_string_value(json_object_get(b0, "id")));
  ok(!exists(b0name), "the build that lost its last tag went");
  free(b0name);
  ok(hutch_images_untag(&s, NULL, "tg", st, &err) == 0 &&
         !hutch_images_find(&s, NULL, "tg:stable", &err),
     "stable taken away");
  ok(hutch_images_untag(&s, NULL, "tg", st, &err) < 0 && err.kind == HUTCH_ERR_NOT_FOUND,
     "taking away a tag nobody has: not found");
  ok(hutch_images_remove(&s, NULL, "tg:v1", &err) == 0 &&
         (t = hutch_images_find(&s, NULL, "tg", &err)),
     "removing tg:v1 keeps the build, tagged latest still");
  json_decref(t);
  if (s.work_lock >= 0) /* adding made the top layer: this process worked in tmp/ */
    close(s.work_lock);
  s.work_lock = -1;
  ok(hutch_images_remove(&s, NULL, "tg", &err) == 0 && !hutch_images_find(&s, NULL, "tg", &err),
     "removing tg takes every build of it");
  char *ld = xasprintf("layers/%s", d);
  ok(!exists(ld), "and its layer");
  free(ld);
  json_decref(lt);
  json_decref(st);
  json_decref(t0);
  json_decref(v1);
  json_decref(b0);
  json_decref(b1);
  free(jname);
  free(gname);
  free(la);
  free(lb);
  json_decref(one);
  json_decref(two);
  json_decref(m);
  hutch_images_close(&s);
  hutch_layer_remove(state, &err);
  return done_testing();
}
