/* Tools' arguments checked against their input schemas: the part of JSON
 * Schema 2020-12 the tools' schemas use (type, properties, required,
 * additionalProperties, enum, minLength/maxLength, minimum/maximum,
 * items, minItems/maxItems). An argument the schema does not name is
 * refused by name: a model's misspelt field is an error it can fix, never
 * a default silently taken. */
#ifndef HUTCH_MCP_SCHEMA_H
#define HUTCH_MCP_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Whether v fits schema; why not in why ("arguments.timeout_s: must be a
 * number, not a string"). */
bool mcp_schema_check(const json_t *schema, const json_t *v, char *why, size_t n);
/* After a check: a whole number given as 5.0 where the schema wants an
 * integer becomes the integer 5 (JSON Schema counts it as one; Python
 * clients send it so), at any depth. */
void mcp_schema_integers(const json_t *schema, json_t *v);

#endif
