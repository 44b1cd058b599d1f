/* hutch-ctl, the operator's CLI: `hutch VERB` for every verb a server
 * answers (ps, exec, kill, ...), a client of the native API
 * (src/client/) and never a second way into the core. What every verb
 * shares is here: the verb table, options, calls to the API, errors and
 * their exit codes, and output. */
#ifndef HUTCH_CTL_H
#define HUTCH_CTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h> /* optind */

#include "client.h"

/* hutch's own failures (docs/cli.md); exec hands on the command's own
 * status instead (128+N for a signal), so these keep clear of 126, 127
 * and 128 and up, as docker's 125 does. */
#define CTL_EXIT_FAILED 125      /* usage, a bad option, the server failed or refused */
#define CTL_EXIT_UNREACHABLE 120 /* no server answered at the URL */
#define CTL_EXIT_DENIED 121      /* the key is missing, wrong, or may not do this */
#define CTL_EXIT_NOT_FOUND 122   /* no such sandbox (volume, key, template, ...) */

struct ctl_verb;

/* One run of hutch-ctl. */
struct ctl {
  const struct ctl_verb *verb;
  struct hc_client client; /* set up by the first call (ctl_api) */
  bool ready;              /* client is set up */
  const char *url, *key;   /* --url, --key */
  bool color;              /* stdout is a terminal and NO_COLOR is unset */
};

/* An option of a verb. --help, --url and --key every verb has. */
struct ctl_opt {
  int id;           /* what ctl_opt_next returns: the letter of -x, or >= 256 for a long one only */
  const char *name; /* the long name, without "--" */
  const char *arg;  /* its argument's name in the help; NULL for a flag */
  const char *help; /* one line */
};

/* A verb: its table (verbs.c) drives dispatch, help and completion. */
struct ctl_verb {
  const char *name;
  const char *args;           /* after the verb in the usage line: "[OPTIONS] ID" */
  const char *summary;        /* one line, for hutch help */
  const struct ctl_opt *opts; /* ends with {0}; NULL: none but the common ones */
  /* argv[0] is the verb; returns the exit code. NULL: a verb hutch itself
   * runs (run, serve, mcp, doctor), listed for help only. */
  int (*run)(struct ctl *ctl, int argc, char **argv);
  const char *subs; /* its subcommands ("create ls rm"), for completion; NULL: none */
};

/* verbs.c: every verb in help's order, the last NULL. A verb's file
 * defines its struct ctl_verb (ctl_verb_ps in ps.c), declared below; add
 * it to the list in verbs.c. */
extern const struct ctl_verb *const ctl_verbs[];
const struct ctl_verb *ctl_verb_find(const char *name);
/* v's usage, summary and options. */
void ctl_help(const struct ctl_verb *v, FILE *to);

/* opts.c: ctl_opt_next is getopt_long over ctl->verb's options (options
 * stop at the first operand, so `exec ID ls -l` keeps -l for ls). It
 * returns an option's id, with *arg its argument (NULL for a flag), or: */
#define CTL_OPT_END (-1)  /* no more: optind is the first operand */
#define CTL_OPT_HELP (-2) /* --help was printed: the verb returns 0 */
#define CTL_OPT_BAD (-3)  /* a bad option, said on stderr: return CTL_EXIT_FAILED */
int ctl_opt_next(struct ctl *ctl, int argc, char **argv, const char **arg);
/* After the options: whether the verb goes on, that is c is CTL_OPT_END
 * and there are from min to max (-1: any number) operands; else false
 * with *rc the exit code (0 after --help), what was wrong said. The loop:
 *   while ((c = ctl_opt_next(ctl, argc, argv, &arg)) >= 0) ...;
 *   if (!ctl_opts_end(ctl, c, argc, argv, 1, 1, &rc)) return rc; */
bool ctl_opts_end(struct ctl *ctl, int c, int argc, char **argv, int min, int max, int *rc);
/* A verb of subcommands (volume create, key ls): the subcommand, argv[1]
 * unless that is an option (NULL then), with argc and argv moved on so
 * that ctl_opt_next reads the options after it too. */
const char *ctl_sub(int *argc, char ***argv);
/* --url, --key and --help (for help and completion). */
const struct ctl_opt *ctl_common_opts(void);

/* api.c: calls of the native API. Each prints the one-line error itself
 * and returns the exit code it maps to (0 on success). */
/* method path (escape its parts with ctl_path) with body (NULL: none; not
 * taken); *out (may be NULL) gets the answer's JSON, NULL for none. */
int ctl_api(struct ctl *ctl, const char *method, const char *path, json_t *body, json_t **out);
/* An NDJSON route: each line to line (HC_LINE_MORE to go on, HC_LINE_STOP
 * to end the request). */
int ctl_stream(struct ctl *ctl, const char *method, const char *path, json_t *body,
               int (*line)(void *arg, json_t *obj), void *arg);
/* A raw request (uploads, downloads) made as ctl_api makes it, for what
 * json bodies do not fit; a->body holds the answer. */
int ctl_call(struct ctl *ctl, const struct hc_req *req, struct hc_answer *a);
/* A server's refusal (status >= 400, its error's code and message) said,
 * and its exit code: what ctl_call does with one, for answers that come
 * another way (the WebSocket's upgrade). */
int ctl_refused(struct ctl *ctl, long status, const char *code, const char *message);
/* A table's columns: n headers, and a row of n cells made of an item. */
struct ctl_table;
struct ctl_columns {
  size_t n;
  const char *const *head;
  void (*row)(json_t *item, struct ctl_table *t);
};
/* GET path and its array answer[field], printed as JSON when as_json,
 * else as a table of cols. */
int ctl_list(struct ctl *ctl, const char *path, const char *field, bool as_json,
             const struct ctl_columns *cols);
/* method on fmt (its one %s each operand, argv[optind..argc)), each
 * operand printed once done; the exit code of the last that failed. */
int ctl_each(struct ctl *ctl, const char *method, const char *fmt, int argc, char **argv);
/* fmt with each %s replaced by its argument escaped for a URL (malloc'd):
 * ctl_path("/v1/sandboxes/%s/pause", id). Only %s is known. */
char *ctl_path(const char *fmt, ...);

/* out.c */
/* s made safe to print (malloc'd): the control characters a terminal
 * would act on, and bytes that are not UTF-8, escaped. TEXT: a byte as
 * \xNN, a C1 character as \u00NN; JSON (s is jansson's output, its
 * newlines kept): each as \u00NN, the same JSON. What hutch prints that it did not write itself
 * (names, messages, labels, events) goes through it. */
enum ctl_clean { CTL_CLEAN_TEXT, CTL_CLEAN_JSON };
char *ctl_clean(const char *s, enum ctl_clean style);
/* "hutch VERB: " and the message (ctl_clean'd) on stderr; returns code. */
int ctl_fail(struct ctl *ctl, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* j as indented JSON and a newline on stdout (ctl_clean'd). */
void ctl_print_json(const json_t *j);
/* ... as one compact line. */
void ctl_print_json_line(const json_t *j);
/* sgr (CTL_BOLD, ...) when ctl->color, else "". */
#define CTL_RESET "\033[0m"
#define CTL_BOLD "\033[1m"
const char *ctl_sgr(const struct ctl *ctl, const char *sgr);
/* An ISO 8601 time as an age ("12s", "5m", "3h", "2d"); "-" if unknown. */
void ctl_age(const char *iso, char out[32]);

/* A table printed in aligned columns, the header bold on a terminal. */
struct ctl_table *ctl_table_new(size_t ncols, const char *const *headers);
/* One row of ncols cells (copied, ctl_clean'd; NULL prints as "-"). */
void ctl_table_row(struct ctl_table *t, const char *const *cells);
/* Print and free. */
void ctl_table_print(const struct ctl *ctl, struct ctl_table *t);

/* The verbs: a file each, or one for a family (life.c: kill, pause,
 * resume, ...). */
extern const struct ctl_verb ctl_verb_help, ctl_verb_version, ctl_verb_ps, ctl_verb_create,
    ctl_verb_exec, ctl_verb_inspect, ctl_verb_kill, ctl_verb_pause, ctl_verb_resume,
    ctl_verb_snapshot, ctl_verb_fork, ctl_verb_port, ctl_verb_volume, ctl_verb_key, ctl_verb_tenant,
    ctl_verb_events, ctl_verb_logs, ctl_verb_template;
extern const struct ctl_verb ctl_verb_shell, ctl_verb_cp, ctl_verb_top;

/* exec.c: the exit status for an exec's verdict (hutch run's rule:
 * src/cli/run.c), why hutch ended it said. */
int ctl_exit_status(struct ctl *ctl, json_t *exit);
/* term_session.c: exec -t, an interactive session on a terminal (with
 * -i, our stdin its input) of the exec's body (cmd, env, cwd, user). */
int ctl_exec_tty(struct ctl *ctl, const char *id, json_t *body, bool in);

#endif
