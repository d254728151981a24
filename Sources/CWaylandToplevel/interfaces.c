// Only libwayland's own header here: the generated one may not be written yet when this file is compiled.
#include <wayland-client.h>

extern const struct wl_interface zwlr_foreign_toplevel_manager_v1_interface;

const struct wl_interface *coalesced_wl_seat_interface(void) {
    return &wl_seat_interface;
}

const struct wl_interface *coalesced_wlr_toplevel_manager_interface(void) {
    return &zwlr_foreign_toplevel_manager_v1_interface;
}
