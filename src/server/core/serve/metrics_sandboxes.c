/* /metrics' series of each sandbox (the operator's: they name sandboxes
 * and tenants): its memory and CPU against its limits, from its newest
 * usage sample (usage.c), and how long its longest running exec has run.
 * deploy/prometheus/hutch-rules.yml alerts on them (docs/alerts.md). */
#include "core/serve/metrics_sandboxes.h"

#include "util.h"
#include "core/run/contexts.h"
#include "core/run/exec.h"
#include "core/run/procs.h"
#include "core/sandbox/sbx.h"
#include "core/tenancy/usage.h"

/* A label value as Prometheus' text format quotes it. Tenant and template
 * names are of letters, digits and -._/: already, but one quote or newline
 * let through would end the value early and make the rest of the scrape
 * unreadable (every series lost, not this one alone). */
static void label_value(FILE *f, const char *v) {
  for (; *v; v++) {
    if (*v == '\\' || *v == '"')
      fprintf(f, "\\%c", *v);
    else if (*v == '\n')
      fputs("\\n", f);
    else
      fputc(*v, f);
  }
}

/* name{sandbox="…",tenant="…",template="…"[,kind="…"]} */
static void series(FILE *f, const char *name, const struct sbx *sb, const char *kind) {
  fprintf(f, "%s{sandbox=\"%s\",tenant=\"", name, sb->id);
  label_value(f, sb->tenant);
  fputs("\",template=\"", f);
  label_value(f, sb->template);
  if (kind)
    fprintf(f, "\",kind=\"%s", kind);
  fputs("\"} ", f);
}

static void help(FILE *f, const char *name, const char *type, const char *text) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* The families of the newest usage sample's values, one at a time, as the
 * text format wants each family's series together. */
enum usage_value { MEMORY, MEMORY_CACHE, MEMORY_LIMIT, CPU_SECONDS, CPUS, USAGE_VALUES };

static const struct {
  const char *name, *type, *help;
} usage_families[USAGE_VALUES] = {
    [MEMORY] = {"hutch_sandbox_memory_bytes", "gauge",
                "A sandbox's memory in use, page cache included (its cgroup's), at its last "
                "sample."},
    [MEMORY_CACHE] = {"hutch_sandbox_memory_cache_bytes", "gauge",
                      "Of a sandbox's memory in use, its page cache (files, tmpfs included)."},
    [MEMORY_LIMIT] = {"hutch_sandbox_memory_limit_bytes", "gauge", "A sandbox's memory limit."},
    [CPU_SECONDS] = {"hutch_sandbox_cpu_seconds_total", "counter",
                     "The CPU time a sandbox has used, at its last sample."},
    [CPUS] = {"hutch_sandbox_cpus", "gauge",
              "The CPUs a sandbox may use: its limit, or the host's when it has none."},
};

static void usage_family(FILE *f, const struct server *srv, enum usage_value which) {
  help(f, usage_families[which].name, usage_families[which].type, usage_families[which].help);
  for (const struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
    struct usage_point pt;
    if (!usage_last(sb, &pt))
      continue; /* made since the sampler's last round */
    if (which == MEMORY_LIMIT && !pt.memory_limit)
      continue; /* no limit: no share of it to alert on */

    series(f, usage_families[which].name, sb, NULL);
    switch (which) {
    case MEMORY:
      fprintf(f, "%llu\n", (unsigned long long)pt.memory_used);
      break;
    case MEMORY_CACHE:
      fprintf(f, "%llu\n", (unsigned long long)pt.memory_cache);
      break;
    case MEMORY_LIMIT:
      fprintf(f, "%llu\n", (unsigned long long)pt.memory_limit);
      break;
    case CPU_SECONDS:
      fprintf(f, "%.6f\n", (double)pt.cpu_ns / 1e9);
      break;
    default: /* CPUS */
      fprintf(f, "%g\n", pt.cpu_limit);
      break;
    }
  }
}

/* The age of the longest running exec of each kind, in each sandbox that
 * runs one: "exec" a foreground exec (its caller follows it), "process" a
 * background one (the native API's background execs, envd's commands),
 * "code" a code context's cell, "start" its template's start command (a
 * service, meant to run on). */
static void exec_ages(FILE *f, const struct server *srv) {
  static const char *const kinds[] = {"exec", "process", "code", "start"};
  int64_t now = wall_ms();
  for (const struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
    int64_t since[] = {exec_oldest_ms(sb), procs_oldest_ms(sb, false), contexts_oldest_ms(sb),
                       procs_oldest_ms(sb, true)};
    for (size_t i = 0; i < sizeof since / sizeof since[0]; i++) {
      if (!since[i])
        continue;
      series(f, "hutch_exec_oldest_running_seconds", sb, kinds[i]);
      fprintf(f, "%.3f\n", now > since[i] ? (double)(now - since[i]) / 1000 : 0.0);
    }
  }
}

void metrics_sandboxes_write(FILE *f, const struct server *srv) {
  for (enum usage_value which = 0; which < USAGE_VALUES; which++)
    usage_family(f, srv, which);
  help(f, "hutch_exec_oldest_running_seconds", "gauge",
       "How long the longest running exec of a kind (exec, process, code, start) in a sandbox "
       "has run.");
  exec_ages(f, srv);
}
