/* URL query strings: percent-decoding and the walk over key=value pairs.
 * Pure functions on the query string (the part after '?'); no connection. */
#ifndef HUTCH_QUERY_H
#define HUTCH_QUERY_H

/* s percent-decoded ('+' as a space; malloc'd), or NULL when malformed:
 * a '%' not followed by two hex digits, an escape that decodes to NUL, or
 * bytes that are not UTF-8. */
char *http_unescape(const char *s);
/* Walk a query string: the next parameter's decoded key and value (either
 * NULL when undecodable; a key without '=' has the value ""), and where the
 * one after starts (NULL at the end). */
const char *http_query_next(const char *q, char **key, char **value);
/* The decoded value of the first parameter of q (may be NULL) whose decoded
 * key is name (malloc'd), or NULL: none, or its value is undecodable. */
char *http_query_get(const char *q, const char *name);

#endif
