/* wl-window [--stamp] APP_ID SOCKET TITLE...: an app with Wayland windows, for the screen agent's tests. It opens
 * one xdg-shell toplevel per TITLE, each with APP_ID as its app_id, then attaches to coalesced on SOCKET as APP_ID
 * (io.coalesced.App.Attach, one process for the windows and the app, as the daemon's pid check wants) and writes
 * each reply to stdout, one line each. SOCKET "-" attaches to nothing. A toplevel the compositor closes goes; the
 * program ends when the daemon ends the stream or the compositor goes away, or on a signal.
 * With --stamp (the screen benchmark), each line starts with CLOCK_MONOTONIC in nanoseconds and a space: a reply's
 * when it was read, and a line "NS activated TITLE" is written when a toplevel's configure newly carries the
 * activated state, so that the compositor's event and the daemon's are timed in one process on one clock. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <wayland-client.h>
#include "xdg-shell-client-protocol.h"

struct window {
	struct wl_surface *surface;
	struct xdg_surface *xdg_surface;
	struct xdg_toplevel *toplevel;
	int32_t width, height, drawn_width, drawn_height;
	int open, activated;
	const char *title;
};

static int stamp;

static long long monotonic_ns(void) {
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec * 1000000000LL + now.tv_nsec;
}

static struct wl_compositor *compositor;
static struct wl_shm *shm;
static struct xdg_wm_base *wm_base;

static void release(void *data, struct wl_buffer *buffer) { (void)data; wl_buffer_destroy(buffer); }
static const struct wl_buffer_listener buffer_listener = { release };

static struct wl_buffer *buffer(int width, int height) {
	int stride = width * 4, size = stride * height;
	int fd = memfd_create("wl-window", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, size) < 0) { perror("wl-window: memfd"); exit(1); }
	uint32_t *pixels = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (pixels == MAP_FAILED) { perror("wl-window: mmap"); exit(1); }
	for (int i = 0; i < width * height; i++) pixels[i] = 0xff406080;
	munmap(pixels, size);
	struct wl_shm_pool *pool = wl_shm_create_pool(shm, fd, size);
	struct wl_buffer *result = wl_shm_pool_create_buffer(pool, 0, width, height, stride, WL_SHM_FORMAT_XRGB8888);
	wl_shm_pool_destroy(pool);
	close(fd);
	wl_buffer_add_listener(result, &buffer_listener, NULL);
	return result;
}

static void ping(void *data, struct xdg_wm_base *base, uint32_t serial) { (void)data; xdg_wm_base_pong(base, serial); }
static const struct xdg_wm_base_listener wm_base_listener = { ping };

static void surface_configure(void *data, struct xdg_surface *xdg_surface, uint32_t serial) {
	struct window *window = data;
	xdg_surface_ack_configure(xdg_surface, serial);
	/* A new buffer only for a new size: a focus change costs no repaint. */
	if (window->width != window->drawn_width || window->height != window->drawn_height) {
		wl_surface_attach(window->surface, buffer(window->width, window->height), 0, 0);
		wl_surface_damage(window->surface, 0, 0, window->width, window->height);
		window->drawn_width = window->width;
		window->drawn_height = window->height;
	}
	wl_surface_commit(window->surface);
}
static const struct xdg_surface_listener surface_listener = { surface_configure };

static void toplevel_configure(void *data, struct xdg_toplevel *toplevel, int32_t width, int32_t height, struct wl_array *states) {
	struct window *window = data;
	(void)toplevel;
	if (width > 0) window->width = width;
	if (height > 0) window->height = height;
	if (!stamp) return;
	int activated = 0;
	uint32_t *state;
	wl_array_for_each(state, states) {
		if (*state == XDG_TOPLEVEL_STATE_ACTIVATED) activated = 1;
	}
	if (activated && !window->activated) {
		printf("%lld activated %s\n", monotonic_ns(), window->title);
		fflush(stdout);
	}
	window->activated = activated;
}
static void toplevel_close(void *data, struct xdg_toplevel *toplevel) {
	struct window *window = data;
	(void)toplevel;
	xdg_toplevel_destroy(window->toplevel);
	xdg_surface_destroy(window->xdg_surface);
	wl_surface_destroy(window->surface);
	window->open = 0;
}
/* Bound at xdg_wm_base version 1: these later events never come, but the listener must have them. */
static void toplevel_bounds(void *d, struct xdg_toplevel *t, int32_t w, int32_t h) { (void)d; (void)t; (void)w; (void)h; }
static void toplevel_capabilities(void *d, struct xdg_toplevel *t, struct wl_array *c) { (void)d; (void)t; (void)c; }
static const struct xdg_toplevel_listener toplevel_listener = {
	toplevel_configure, toplevel_close, toplevel_bounds, toplevel_capabilities,
};

static void global(void *data, struct wl_registry *registry, uint32_t name, const char *interface, uint32_t version) {
	(void)data; (void)version;
	if (!strcmp(interface, "wl_compositor")) compositor = wl_registry_bind(registry, name, &wl_compositor_interface, 4);
	else if (!strcmp(interface, "wl_shm")) shm = wl_registry_bind(registry, name, &wl_shm_interface, 1);
	else if (!strcmp(interface, "xdg_wm_base")) {
		wm_base = wl_registry_bind(registry, name, &xdg_wm_base_interface, 1);
		xdg_wm_base_add_listener(wm_base, &wm_base_listener, NULL);
	}
}
static void global_remove(void *data, struct wl_registry *registry, uint32_t name) { (void)data; (void)registry; (void)name; }
static const struct wl_registry_listener registry_listener = { global, global_remove };

static int attach(const char *path, const char *app) {
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	if (fd < 0 || strlen(path) >= sizeof address.sun_path) { fprintf(stderr, "wl-window: bad socket %s\n", path); exit(1); }
	strcpy(address.sun_path, path);
	if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) { perror("wl-window: connect"); exit(1); }
	char call[512];
	int length = snprintf(call, sizeof call,
		"{\"method\":\"io.coalesced.App.Attach\",\"parameters\":{\"app\":\"%s\"},\"more\":true}", app);
	if (length < 0 || (size_t)length >= sizeof call || write(fd, call, length + 1) != length + 1) {
		perror("wl-window: write");
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv) {
	if (argc > 1 && !strcmp(argv[1], "--stamp")) {
		stamp = 1;
		argv++;
		argc--;
	}
	if (argc < 4) { fprintf(stderr, "usage: wl-window [--stamp] APP_ID SOCKET TITLE...\n"); return 2; }
	struct wl_display *display = wl_display_connect(NULL);
	if (!display) { perror("wl-window: wl_display_connect"); return 1; }
	wl_registry_add_listener(wl_display_get_registry(display), &registry_listener, NULL);
	wl_display_roundtrip(display);
	if (!compositor || !shm || !wm_base) { fprintf(stderr, "wl-window: no wl_compositor, wl_shm or xdg_wm_base\n"); return 1; }
	int count = argc - 3;
	struct window *windows = calloc(count, sizeof *windows);
	for (int i = 0; i < count; i++) {
		struct window *window = &windows[i];
		window->width = 320;
		window->height = 200;
		window->open = 1;
		window->title = argv[3 + i];
		window->surface = wl_compositor_create_surface(compositor);
		window->xdg_surface = xdg_wm_base_get_xdg_surface(wm_base, window->surface);
		xdg_surface_add_listener(window->xdg_surface, &surface_listener, window);
		window->toplevel = xdg_surface_get_toplevel(window->xdg_surface);
		xdg_toplevel_add_listener(window->toplevel, &toplevel_listener, window);
		xdg_toplevel_set_app_id(window->toplevel, argv[1]);
		xdg_toplevel_set_title(window->toplevel, argv[3 + i]);
		wl_surface_commit(window->surface); /* without a buffer: asks for the first configure */
	}
	wl_display_roundtrip(display);
	int daemon = strcmp(argv[2], "-") ? attach(argv[2], argv[1]) : -1;

	char line[65536];
	size_t filled = 0;
	for (;;) {
		while (wl_display_prepare_read(display) != 0) wl_display_dispatch_pending(display);
		wl_display_flush(display);
		struct pollfd fds[2] = {
			{ .fd = wl_display_get_fd(display), .events = POLLIN },
			{ .fd = daemon, .events = POLLIN },
		};
		if (poll(fds, 2, -1) < 0) {
			wl_display_cancel_read(display);
			if (errno == EINTR) continue;
			return 1;
		}
		if (fds[0].revents & POLLIN) {
			if (wl_display_read_events(display) < 0) return 1;
		} else {
			wl_display_cancel_read(display);
		}
		if (wl_display_dispatch_pending(display) < 0) return 1;
		if (fds[0].revents & (POLLERR | POLLHUP)) return 1;
		if (daemon >= 0 && fds[1].revents) {
			ssize_t got = read(daemon, line + filled, sizeof line - filled);
			if (got <= 0) return 0;
			long long read_at = stamp ? monotonic_ns() : 0;
			for (ssize_t i = 0; i < got; i++) {
				if (line[filled + i] == '\0') line[filled + i] = '\n';
			}
			filled += got;
			char *end = memrchr(line, '\n', filled);
			if (end) {
				if (!stamp) fwrite(line, 1, end - line + 1, stdout);
				/* A line is stamped with the read that brought its end. */
				for (char *start = line; stamp && start <= end;) {
					char *newline = memchr(start, '\n', end - start + 1);
					printf("%lld %.*s\n", read_at, (int)(newline - start), start);
					start = newline + 1;
				}
				fflush(stdout);
				filled -= end - line + 1;
				memmove(line, end + 1, filled);
			}
			if (filled == sizeof line) return 1;
		}
	}
}
