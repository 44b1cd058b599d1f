/* runsc, found and started (gvisor.h). */
#include "gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "hostlimits.h"
#include "layout.h"
#include "util.h"

static bool find_runsc(char *out, size_t size) {
  const char *env = getenv("HUTCH_RUNSC");
  if (env && *env)
    return (size_t)snprintf(out, size, "%s", env) < size && access(out, X_OK) == 0;
  const char *path = getenv("PATH");
  if (!path || !*path)
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    if (n > 0 && p[0] == '/' && (size_t)snprintf(out, size, "%.*s/runsc", (int)n, p) < size &&
        access(out, X_OK) == 0)
      return true;
    p += n + (p[n] == ':');
  }
  return false;
}

/* The first line `runsc --version` prints, within ten seconds
 * ("runsc version 0.0~20221219.0"); "" when it printed none. Its 40 MB
 * take seconds to load on a slow disk or an emulated guest (tests/vm:
 * over 2 s), and a server probes it once. */
static void first_line_of_version(const char *prog, char *line, size_t size) {
  int p[2];
  line[0] = '\0';
  if (pipe2(p, O_CLOEXEC) < 0)
    return;

  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
      _exit(127);
    /* stdout into the pipe, stdin and stderr from and to /dev/null. */
    const int from[3] = {null, p[1], null};
    for (int fd = 0; fd < 3; fd++)
      if (dup2(from[fd], fd) < 0)
        _exit(127);
    execl(prog, prog, "--version", (char *)NULL);
    _exit(127);
  }

  close(p[1]);
  struct pollfd pf = {.fd = p[0], .events = POLLIN};
  ssize_t n = pid > 0 && poll(&pf, 1, 10000) == 1 ? read(p[0], line, size - 1) : 0;
  line[n > 0 ? n : 0] = '\0';
  line[strcspn(line, "\n")] = '\0';
  close(p[0]);

  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
}

int hutch_gvisor_find(struct hutch_gvisor *g, const char *want, struct hutch_err *err) {
  memset(g, 0, sizeof *g);
  if (!find_runsc(g->runsc, sizeof g->runsc))
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "gvisor_unavailable",
                          "the gvisor tier needs runsc (gVisor), which is not "
                          "installed: apt-get install runsc (scripts/deps.sh does)");
  if (!want || !*want || strcmp(want, "ptrace") == 0) {
    snprintf(g->platform, sizeof g->platform, "ptrace");
    return 0;
  }
  if (strcmp(want, "kvm") != 0)
    return hutch_err_invalid(err, "gVisor platform '%s': ptrace or kvm", want);
  _cleanup_close_ int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm < 0)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "gvisor_unavailable",
                          "gVisor's kvm platform needs /dev/kvm: %s", strerror(errno));
  snprintf(g->platform, sizeof g->platform, "kvm");
  return 0;
}

int hutch_gvisor_probe(struct hutch_gvisor *g, const char *want, struct hutch_err *err) {
  if (hutch_gvisor_find(g, want, err) < 0)
    return -1;
  char line[160];
  first_line_of_version(g->runsc, line, sizeof line);
  if (strncmp(line, "runsc version ", 14) != 0)
    return hutch_err_fail(err, HUTCH_ERR_UNSUPPORTED, "gvisor_unavailable",
                          "%s --version said \"%s\": is it gVisor's runsc?", g->runsc, line);
  snprintf(g->version, sizeof g->version, "%.*s", (int)sizeof g->version - 1, line + 14);
  return 0;
}

/* Every capability gVisor knows, for the agent: they are capabilities of
 * gVisor's kernel, which the agent drops for each workload as it does in
 * the ns tier; none of them is a capability on the host. */
#define CAPS                                                                                   \
  "\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_DAC_READ_SEARCH\",\"CAP_FOWNER\",\"CAP_FSETID\","  \
  "\"CAP_KILL\",\"CAP_SETGID\",\"CAP_SETUID\",\"CAP_SETPCAP\",\"CAP_NET_BIND_SERVICE\","       \
  "\"CAP_NET_ADMIN\",\"CAP_NET_RAW\",\"CAP_IPC_OWNER\",\"CAP_SYS_CHROOT\",\"CAP_SYS_PTRACE\"," \
  "\"CAP_SYS_ADMIN\",\"CAP_SYS_RESOURCE\",\"CAP_SYS_NICE\",\"CAP_MKNOD\",\"CAP_AUDIT_WRITE\"," \
  "\"CAP_SETFCAP\""

/* The agent's uid in gVisor's kernel: none a workload can have (theirs are
 * below HUTCH_ID_RANGE, the sandbox's root among them). gVisor lets a
 * process signal PID 1 and open its /proc/1/fd entries by uid alone, with
 * none of the host's protection of a namespace's init: as uid 0 the agent
 * could be killed, and its exec pipes opened, by any workload run as root.
 * Its capabilities come from the bundle, not from being root. */
#define AGENT_UID "65536"

/* The workload's process limit is gVisor's to keep: its processes are not
 * the host's, and each costs the host up to five (under ptrace, a stub and
 * the sentry's threads tracing it; 53 for an idle sandbox, 664 with 120
 * sleeping processes). With the host's limit alone a workload forking up
 * to it ends its sandbox (the sentry cannot make a thread) where it should
 * get EAGAIN, so RLIMIT_NPROC holds it inside, per uid (the user's and
 * root's execs: twice), and the cgroup leaves the sentry room for that. */
#define HOST_PIDS_BASE 128
#define HOST_PIDS_PER_TASK 6

uint64_t hutch_gvisor_host_pids(uint64_t pids) {
  /* Never past what one sandbox may hold of the host's (hutch_config_check):
   * there a fork under more uids than two can still end the sandbox, not
   * the host. */
  uint64_t host = HOST_PIDS_BASE + 2 * HOST_PIDS_PER_TASK * pids, most = hutch_pids_max();
  return host < most ? host : most;
}

int hutch_gvisor_bundle(int dirfd, const char *hostname, uint64_t memory_bytes, uint64_t pids,
                        struct hutch_err *err) {
  char spec[4096];
  int n = snprintf(
      spec, sizeof spec,
      "{\"ociVersion\":\"1.0.2\","
      "\"process\":{\"terminal\":false,\"user\":{\"uid\":" AGENT_UID ",\"gid\":" AGENT_UID "},"
      "\"args\":[\"/dev/.hutch-agent\",\"--cgroup\",\"none\"],"
      "\"env\":[\"PATH=" HUTCH_DEFAULT_PATH "\"],\"cwd\":\"/\","
      "\"capabilities\":{\"bounding\":[" CAPS "],\"effective\":[" CAPS "],"
      "\"permitted\":[" CAPS "]},"
      "\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"hard\":65536,\"soft\":65536},"
      "{\"type\":\"RLIMIT_NPROC\",\"hard\":%llu,\"soft\":%llu}]},"
      "\"root\":{\"path\":\"root\",\"readonly\":false},"
      "\"hostname\":\"%s\","
      "\"mounts\":["
      "{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
      "{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\","
      "\"options\":[\"nosuid\",\"noexec\",\"strictatime\",\"mode=755\",\"size=65536k\"]},"
      "{\"destination\":\"/dev/pts\",\"type\":\"devpts\",\"source\":\"devpts\","
      "\"options\":[\"nosuid\",\"noexec\",\"newinstance\",\"ptmxmode=0666\",\"mode=0620\"]},"
      "{\"destination\":\"/dev/shm\",\"type\":\"tmpfs\",\"source\":\"shm\","
      "\"options\":[\"nosuid\",\"noexec\",\"nodev\",\"mode=1777\",\"size=65536k\"]},"
      "{\"destination\":\"/sys\",\"type\":\"sysfs\",\"source\":\"sysfs\","
      "\"options\":[\"nosuid\",\"noexec\",\"nodev\",\"ro\"]},"
      /* /tmp named, or runsc mounts a tmpfs of its own there: files in it
       * would live in the sentry's memory, outside the overlay that
       * snapshots and forks capture. */
      "{\"destination\":\"/tmp\",\"type\":\"bind\",\"source\":\"/root/tmp\","
      "\"options\":[\"rbind\",\"rw\"]},"
      "{\"destination\":\"/dev/.hutch-agent\",\"type\":\"bind\",\"source\":\"/agent\","
      "\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\"]}],"
      "\"linux\":{\"resources\":{\"memory\":{\"limit\":%llu}},"
      "\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},"
      "{\"type\":\"mount\"}]}}\n",
      (unsigned long long)pids, (unsigned long long)pids, hostname,
      (unsigned long long)memory_bytes);
  if (n < 0 || (size_t)n >= sizeof spec)
    return hutch_err_invalid(err, "gVisor bundle: config too long");

  _cleanup_close_ int fd =
      openat(dirfd, "config.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || write_all(fd, spec, (size_t)n) < 0)
    return hutch_err_set(err, errno, "gVisor bundle: config.json");
  return 0;
}

int hutch_gvisor_exec(int runsc_fd, const struct hutch_gvisor *g, const char *id,
                      struct hutch_err *err) {
  char platform[32];
  snprintf(platform, sizeof platform, "--platform=%s", g->platform);
  /* --network=host: gVisor's sockets are the host kernel's, in the
   * sandbox's own network namespace, which has loopback only and the
   * egress proxy's listener (docs/isolation.md): the one route out is the
   * proxy, as in the ns tier. --ignore-cgroups: runsc runs inside the
   * sandbox's cgroup, which hutch made and limits. --file-access=shared:
   * every write reaches the overlay at once, where the host measures the
   * disk and snapshots take it. */
  char *argv[] = {"runsc",
                  "--root=/runsc",
                  "--log=/runsc/log",
                  platform,
                  "--network=host",
                  "--ignore-cgroups",
                  "--file-access=shared",
                  "run",
                  "--bundle=/",
                  (char *)id,
                  NULL};
  char *envp[] = {"PATH=/", NULL};
  syscall(SYS_execveat, runsc_fd, "", argv, envp, AT_EMPTY_PATH);
  return hutch_err_set(err, errno, "exec runsc");
}
