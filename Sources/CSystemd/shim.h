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

#endif
