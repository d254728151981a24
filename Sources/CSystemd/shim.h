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
// prctl, which Swift cannot call (it takes variable arguments): the daemon as a child subreaper, so that what a
// notification command leaves behind comes back to the daemon to be killed and reaped.
#include <sys/prctl.h>

static inline int coalesced_set_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

#endif
