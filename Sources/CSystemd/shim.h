#ifndef COALESCED_CSYSTEMD_SHIM_H
#define COALESCED_CSYSTEMD_SHIM_H

// No _GNU_SOURCE here: it would give system types such as fd_set a second definition that clashes with Glibc's
// module. struct ucred comes from Glibc, which Swift builds with _GNU_SOURCE already.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-bus.h>

#endif
