#ifndef COALESCED_CXCB_SHIM_H
#define COALESCED_CXCB_SHIM_H

// The X protocol through xcb, for coalesce-screen-agent alone (X11Session is the only module that imports this):
// the core protocol, EWMH's atoms (xcb-ewmh) and the X-Resource extension, which names the process behind a
// window's connection (xcb-res).
#include <xcb/xcb.h>
// xcb_poll_for_reply: an answer looked for without blocking, so that every wait has a deadline.
#include <xcb/xcbext.h>
#include <xcb/xcb_ewmh.h>
#include <xcb/res.h>

// X-Resource's extension data (present or not), without Swift touching libxcb-res's mutable global xcb_res_id.
static inline const xcb_query_extension_reply_t *coalesced_xcb_res_extension(xcb_connection_t *connection) {
    return xcb_get_extension_data(connection, &xcb_res_id);
}

#endif
