// Preloaded into the daemon under valgrind by scripts/profile. An async Swift main ends in dispatch_main(), which
// parks the main thread in a signal-handling loop that valgrind 3.19 dies on ("the 'impossible' happened", at the
// daemon's first thread). This dispatch_main drains the main queue from a plain poll loop instead, as Foundation's
// run loop does on Linux, so the daemon runs unchanged otherwise.
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *message);

void dispatch_main(void) {
    int queue = _dispatch_get_main_queue_handle_4CF();
    for (;;) {
        struct pollfd ready = {queue, POLLIN, 0};
        if (poll(&ready, 1, -1) < 0) continue;
        uint64_t count;
        (void)read(queue, &count, sizeof count);
        _dispatch_main_queue_callback_4CF(0);
    }
}
