/* The host's own limits and what hutch derives from them (hostlimits.h).
 * Every figure is read from the kernel each time: the same binary runs on
 * hosts of 3 and of 24 GiB, with pid_max 32768 or 4194304. */
#include "hostlimits.h"

#include <stdio.h>
#include <unistd.h>

static uint64_t read_u64(const char *path, uint64_t fallback) {
  FILE *f = fopen(path, "re");
  unsigned long long v;
  if (!f)
    return fallback;
  int n = fscanf(f, "%llu", &v);
  fclose(f);
  return n == 1 ? (uint64_t)v : fallback;
}

uint64_t hutch_host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

uint64_t hutch_host_memory_reserve(uint64_t ram) {
  uint64_t r = ram / 8;
  return r > (512ull << 20) ? r : 512ull << 20;
}

uint64_t hutch_memory_ceiling(void) {
  uint64_t ram = hutch_host_memory(), reserve = hutch_host_memory_reserve(ram);
  if (ram == UINT64_MAX)
    return ram;
  return ram > 2 * reserve ? ram - reserve : ram / 2;
}

uint64_t hutch_tenant_memory_default(void) {
  uint64_t ceiling = hutch_memory_ceiling();
  return ceiling > UINT64_MAX / 4 ? UINT64_MAX : 4 * ceiling;
}

uint64_t hutch_host_pid_max(void) {
  uint64_t pid = read_u64("/proc/sys/kernel/pid_max", 32768);
  uint64_t threads = read_u64("/proc/sys/kernel/threads-max", pid);
  return threads < pid ? threads : pid;
}

uint64_t hutch_pids_ceiling(void) {
  uint64_t max = hutch_host_pid_max(), reserve = max / 8 > 1024 ? max / 8 : 1024;
  return max > 2 * reserve ? max - reserve : max / 2;
}

uint64_t hutch_pids_max(void) {
  uint64_t half = hutch_host_pid_max() / 2;
  return half < 65536 ? half : 65536;
}

int hutch_host_ptys(struct hutch_host_ptys *p) {
  p->max = read_u64("/proc/sys/kernel/pty/max", 0);
  p->reserve = read_u64("/proc/sys/kernel/pty/reserve", 0);
  p->nr = read_u64("/proc/sys/kernel/pty/nr", 0);
  return p->max ? 0 : -1;
}

uint64_t hutch_ptys_shared(const struct hutch_host_ptys *p) {
  return p->max > p->reserve ? p->max - p->reserve : 0;
}
