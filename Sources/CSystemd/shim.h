#ifndef COALESCED_CSYSTEMD_SHIM_H
#define COALESCED_CSYSTEMD_SHIM_H

// No _GNU_SOURCE here: it would give system types such as fd_set a second definition that clashes with Glibc's
// module. struct ucred comes from Glibc, which Swift builds with _GNU_SOURCE already.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-bus.h>
// pidfd_open and pidfd_send_signal (glibc 2.36): signals that cannot reach a process that reused a pid.
#include <sys/pidfd.h>
// timerfd (notification timers, and the benchmark's floor), which Swift's Glibc module leaves out.
#include <sys/timerfd.h>
// eventfd, which wakes the D-Bus connection's thread.
#include <sys/eventfd.h>
// posix_spawn, for posix_spawn_file_actions_addclosefrom_np below.
#include <spawn.h>
// prctl, which Swift cannot call (it takes variable arguments): the daemon as a child subreaper, so that what a
// notification command leaves behind comes back to the daemon to be killed and reaped.
#include <sys/prctl.h>

static inline int coalesced_set_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

// glibc's posix_spawn_file_actions_addclosefrom_np (2.34 and later), which <spawn.h> declares only with _GNU_SOURCE.
// Weak, so that an older C library leaves the descriptors open rather than failing to load the daemon.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from)
    __attribute__((weak));

// Has the spawned program's descriptors from `from` on closed; 0, or an errno. Does nothing where the C library
// cannot (before glibc 2.34).
static inline int coalesced_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int from) {
    if (!posix_spawn_file_actions_addclosefrom_np) return 0;
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

#endif
