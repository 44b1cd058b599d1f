/* libFuzzer target: the Dockerfile parser (src/image/dockerfile.c) and
 * the word splitting and substitution the builder applies to each
 * instruction's arguments and flags. A Dockerfile is anyone's text: no
 * input may crash, leak, hang or read out of bounds.
 *
 * Input: the Dockerfile itself. */
#include <stdint.h>
#include <string.h>

#include "dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct dockerfile df;
  struct hutch_err err = {0};
  if (dockerfile_parse((const char *)data, size, &df, &err) < 0)
    return 0;
  json_t *vars = json_pack("{s:s,s:s,s:s}", "A", "a b", "EMPTY", "", "P", "$A");
  for (size_t i = 0; i < df.n; i++) {
    const struct df_instr *in = &df.v[i];
    if (in->rest) {
      json_decref(df_words(in->rest, vars, df.escape, &err));
      free(df_word(in->rest, vars, df.escape, &err));
    }
    for (size_t k = 0; k < in->nflags; k++)
      free(df_word(in->flags[k].value, vars, df.escape, &err));
  }
  json_decref(vars);
  dockerfile_free(&df);
  return 0;
}
