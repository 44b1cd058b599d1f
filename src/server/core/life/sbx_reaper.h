/* The reaper of sandboxes past their timeout (sbx_reaper.c). */
#ifndef HUTCH_CORE_LIFE_SBX_REAPER_H
#define HUTCH_CORE_LIFE_SBX_REAPER_H

struct server;

void sbx_reaper_start(struct server *srv);

#endif
