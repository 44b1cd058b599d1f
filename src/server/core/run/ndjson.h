/* A workload's output as NDJSON lines: {"type":"stdout"|"stderr","data":…}
 * when the bytes are UTF-8 text, "data_b64" when not. A multi-byte
 * character that a chunk's end cuts in two is held back and sent whole
 * with the next chunk. */
#ifndef HUTCH_CORE_RUN_NDJSON_H
#define HUTCH_CORE_RUN_NDJSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ndjson {
  uint8_t carry[2][4]; /* [0] stdout, [1] stderr */
  size_t ncarry[2];
};

/* The line (malloc'd, ending in '\n', *len set) for data on stream which
 * (0 stdout, 1 stderr), or NULL when all of it is held back. last: no more
 * will come, send what is held back too. */
char *ndjson_next(struct ndjson *o, int which, const uint8_t *data, size_t len, bool last,
                  size_t *line_len);

/* The last line of an exec ({"type":"exit", …verdict}) from the agent's
 * last frame on its stream: the EVENT exit, or an ERROR (the agent refused
 * the exec: sandbox_error). j is the frame's payload, parsed. */
json_t *ndjson_exit(uint8_t frame_type, json_t *j);
/* The exit line of an exec whose sandbox went away under it. */
json_t *ndjson_exit_gone(const char *message);

#endif
