#ifndef COALESCED_CWAYLANDTOPLEVEL_H
#define COALESCED_CWAYLANDTOPLEVEL_H

// libwayland-client and wlr-foreign-toplevel-management-unstable-v1 (the client header wayland-scanner generates at
// build time from the XML beside this file), for coalesce-screen-agent alone: only WaylandSession imports this.
#include <wayland-client.h>
#include "wlr-foreign-toplevel-management-unstable-v1-client-protocol.h"

// The interfaces a client binds, by address: libwayland keeps the pointer in each proxy it makes, so Swift must not
// pass the address of a copy.
const struct wl_interface *coalesced_wl_seat_interface(void);
const struct wl_interface *coalesced_wlr_toplevel_manager_interface(void);

#endif
