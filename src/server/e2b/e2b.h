/* The E2B-compatible API (docs/e2b.md): E2B's REST API beside the native
 * one, and, by the E2b-Sandbox-Id and E2b-Sandbox-Port headers, each
 * sandbox's envd and code interpreter. Each handler turns the E2B request
 * into the native core's and its answer back; each module's handlers are
 * in its own header. What its modules and routes.c share is here: the
 * ports envd and the interpreter answer on, and the envd version. */
#ifndef HUTCH_E2B_E2B_H
#define HUTCH_E2B_E2B_H

#define E2B_ENVD_PORT "49983"
#define E2B_INTERPRETER_PORT "49999"
/* What envd version hutch answers as: the E2B SDKs switch features by it
 * (docs/e2b.md says which this one gives). */
#define E2B_ENVD_VERSION "0.6.4"

#endif
