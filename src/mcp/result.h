/* CallToolResult values a model can use: text, images, errors that say
 * what to fix, and output cut to a size a context can hold. */
#ifndef HUTCH_MCP_RESULT_H
#define HUTCH_MCP_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "client.h"

/* {"content":[{"type":"text","text":...}],"isError":false} */
json_t *mcp_result_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An error the model can act on: isError, and one text line "CODE: message". */
json_t *mcp_result_error(const char *code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The native API's refusal as such an error (its code, status and message). */
json_t *mcp_result_native(const struct hc_answer *a);
/* A JSON value as the result's text (pretty, for a model to read) and as
 * structuredContent. Takes v's reference. */
json_t *mcp_result_json(json_t *v);
/* Append a content block to r's content. Takes block's reference. */
void mcp_result_add(json_t *r, json_t *block);
json_t *mcp_block_text(const char *text, size_t len);
json_t *mcp_block_image(const char *b64, const char *mime);

/* A command's output as it comes: the whole kept (up to a bound) for a file,
 * and what a result shows cut to MCP_TEXT_MAX as head and tail. */
struct mcp_output {
  char *data;
  size_t len, cap;
  size_t total; /* every byte seen, also those past the bound */
};
void mcp_output_add(struct mcp_output *o, const char *p, size_t n);
/* The text a result shows: o whole when it fits in max, else its head and
 * tail around a line saying how much was left out and where the whole is
 * (saved_as, or NULL when it could not be kept). malloc'd. */
char *mcp_output_show(const struct mcp_output *o, size_t max, const char *saved_as);
void mcp_output_free(struct mcp_output *o);

#endif
