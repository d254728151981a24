/* x11-window: an app for the screen agent's X11 tests, one process that both shows X11 windows and attaches to
 * coalesced, as the daemon needs before it takes a window for a scene of the app (the window's process is the app's).
 *
 *   x11-window [--socket PATH] [--net-wm-pid PID] [--iconic] APP_ID TITLE...
 *
 * Creates one window per TITLE, with WM_CLASS "app","APP_ID", WM_NAME and _NET_WM_NAME the title, and _NET_WM_PID
 * its own pid, or PID (a forgery: anyone may write that property); prints "window 0x%08x TITLE" for each. With
 * --socket it attaches to the daemon there (io.coalesced.App.Attach with "more") and prints each reply on a line of
 * its own as it comes. It maps its windows when it reads the line "map" on stdin (so the test decides when the
 * window manager sees them: after the app is attached), minimized with --iconic (ICCCM's initial IconicState), and
 * prints "mapped". It exits when stdin closes, or when the daemon closes the stream ("daemon closed").
 * Built by the tests with cc, against xcb. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <xcb/xcb.h>

#define MAX_WINDOWS 16

static xcb_atom_t intern(xcb_connection_t *c, const char *name) {
	xcb_intern_atom_reply_t *reply = xcb_intern_atom_reply(c, xcb_intern_atom(c, 0, strlen(name), name), NULL);
	xcb_atom_t atom = reply ? reply->atom : XCB_NONE;
	free(reply);
	return atom;
}

static int connect_daemon(const char *path) {
	struct sockaddr_un address = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof address.sun_path) return -1;
	strcpy(address.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) < 0) return -1;
	return fd;
}

static int send_all(int fd, const char *bytes, size_t length) {
	while (length > 0) {
		ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL);
		if (sent < 0 && errno == EINTR) continue;
		if (sent <= 0) return -1;
		bytes += sent;
		length -= (size_t)sent;
	}
	return 0;
}

int main(int argc, char **argv) {
	const char *socket_path = NULL;
	long forged_pid = 0;
	int iconic = 0;
	int arg = 1;
	for (; arg < argc && !strncmp(argv[arg], "--", 2); arg++) {
		if (!strcmp(argv[arg], "--socket") && arg + 1 < argc) socket_path = argv[++arg];
		else if (!strcmp(argv[arg], "--net-wm-pid") && arg + 1 < argc) forged_pid = strtol(argv[++arg], NULL, 10);
		else if (!strcmp(argv[arg], "--iconic")) iconic = 1;
		else { fprintf(stderr, "x11-window: unknown option %s\n", argv[arg]); return 2; }
	}
	if (argc - arg < 2 || argc - arg - 1 > MAX_WINDOWS) {
		fprintf(stderr, "usage: x11-window [--socket PATH] [--net-wm-pid PID] [--iconic] APP_ID TITLE... (1 to %d)\n", MAX_WINDOWS);
		return 2;
	}
	const char *app = argv[arg++];
	if (strlen(app) > 255 || strpbrk(app, "\"\\")) { fprintf(stderr, "x11-window: app id too long or with quotes\n"); return 2; }

	int screen_number = 0;
	xcb_connection_t *c = xcb_connect(NULL, &screen_number);
	if (xcb_connection_has_error(c)) { fprintf(stderr, "x11-window: cannot open the display\n"); return 1; }
	xcb_screen_iterator_t screens = xcb_setup_roots_iterator(xcb_get_setup(c));
	for (int i = 0; i < screen_number; i++) xcb_screen_next(&screens);
	xcb_screen_t *screen = screens.data;
	xcb_atom_t net_wm_name = intern(c, "_NET_WM_NAME"), utf8 = intern(c, "UTF8_STRING"), net_wm_pid = intern(c, "_NET_WM_PID");

	/* WM_CLASS: "instance\0class\0". */
	char wm_class[300];
	int class_length = snprintf(wm_class, sizeof wm_class, "app%c%s", '\0', app) + 1;
	uint32_t pid = (uint32_t)(forged_pid > 0 ? forged_pid : getpid());
	/* WM_HINTS: flags InputHint | StateHint, input True, initial state Normal (1) or Iconic (3). */
	uint32_t hints[9] = {1 | 2, 1, iconic ? 3 : 1, 0, 0, 0, 0, 0, 0};
	xcb_window_t windows[MAX_WINDOWS];
	int count = argc - arg;
	for (int i = 0; i < count; i++) {
		const char *title = argv[arg + i];
		xcb_window_t w = windows[i] = xcb_generate_id(c);
		uint32_t background = screen->white_pixel;
		xcb_create_window(c, XCB_COPY_FROM_PARENT, w, screen->root, 10 + 30 * i, 10 + 30 * i, 320, 200, 0,
			XCB_WINDOW_CLASS_INPUT_OUTPUT, screen->root_visual, XCB_CW_BACK_PIXEL, &background);
		xcb_change_property(c, XCB_PROP_MODE_REPLACE, w, XCB_ATOM_WM_CLASS, XCB_ATOM_STRING, 8, class_length, wm_class);
		xcb_change_property(c, XCB_PROP_MODE_REPLACE, w, XCB_ATOM_WM_NAME, XCB_ATOM_STRING, 8, strlen(title), title);
		xcb_change_property(c, XCB_PROP_MODE_REPLACE, w, net_wm_name, utf8, 8, strlen(title), title);
		xcb_change_property(c, XCB_PROP_MODE_REPLACE, w, net_wm_pid, XCB_ATOM_CARDINAL, 32, 1, &pid);
		xcb_change_property(c, XCB_PROP_MODE_REPLACE, w, XCB_ATOM_WM_HINTS, XCB_ATOM_WM_HINTS, 32, 9, hints);
		printf("window 0x%08x %s\n", w, title);
	}
	xcb_flush(c);
	fflush(stdout);

	int daemon = -1;
	if (socket_path) {
		daemon = connect_daemon(socket_path);
		char call[512];
		int length = snprintf(call, sizeof call,
			"{\"method\":\"io.coalesced.App.Attach\",\"parameters\":{\"app\":\"%s\"},\"more\":true}", app);
		if (daemon < 0 || send_all(daemon, call, (size_t)length + 1) < 0) {
			fprintf(stderr, "x11-window: cannot attach through %s: %s\n", socket_path, strerror(errno));
			return 1;
		}
	}

	char input[256];
	size_t input_length = 0;
	char reply[65536];
	size_t reply_length = 0;
	for (;;) {
		struct pollfd fds[3] = {
			{.fd = 0, .events = POLLIN}, {.fd = xcb_get_file_descriptor(c), .events = POLLIN}, {.fd = daemon, .events = POLLIN}};
		if (poll(fds, 3, -1) < 0) {
			if (errno == EINTR) continue;
			return 1;
		}
		if (fds[0].revents) {
			ssize_t got = read(0, input + input_length, sizeof input - 1 - input_length);
			if (got <= 0) return 0;
			input_length += (size_t)got;
			char *newline;
			while ((newline = memchr(input, '\n', input_length))) {
				*newline = '\0';
				if (!strcmp(input, "map")) {
					for (int i = 0; i < count; i++) xcb_map_window(c, windows[i]);
					xcb_flush(c);
					printf("mapped\n");
					fflush(stdout);
				}
				input_length -= (size_t)(newline + 1 - input);
				memmove(input, newline + 1, input_length);
			}
			if (input_length == sizeof input - 1) input_length = 0;
		}
		if (fds[1].revents) {
			/* Nothing is asked for; what comes (an error, a message from the window manager) is passed over. */
			xcb_generic_event_t *event;
			while ((event = xcb_poll_for_event(c))) free(event);
			if (xcb_connection_has_error(c)) { fprintf(stderr, "x11-window: lost the display\n"); return 1; }
		}
		if (daemon >= 0 && fds[2].revents) {
			ssize_t got = recv(daemon, reply + reply_length, sizeof reply - reply_length, 0);
			if (got < 0 && errno == EINTR) continue;
			if (got <= 0) {
				printf("daemon closed\n");
				fflush(stdout);
				return 0;
			}
			reply_length += (size_t)got;
			char *nul;
			while ((nul = memchr(reply, '\0', reply_length))) {
				printf("%s\n", reply);
				reply_length -= (size_t)(nul + 1 - reply);
				memmove(reply, nul + 1, reply_length);
			}
			fflush(stdout);
			if (reply_length == sizeof reply) { fprintf(stderr, "x11-window: a reply longer than 64 KiB\n"); return 1; }
		}
	}
}
