"""The Varlink side of Benchmarks/Sandbox/journal.sh, run inside the systemd sandbox with the PyPI varlink package.

    journal-client.py add WATCHES UNIT APP START            add WATCHES watches of UNIT reading from START
    journal-client.py poll LINES MATCHED                    poll Stats until the reader has read and matched all
    journal-client.py remove PREFIX                         remove every runtime watch whose name starts with PREFIX
    journal-client.py app APP KIND COUNT OUT                the app: attach, acknowledge, write each event's times
    journal-client.py rtt SECONDS INTERVAL OUT              Stats round trips, one every INTERVAL s, for SECONDS
    journal-client.py flood RATE SECONDS OUT                a writer: RATE lines/s on stdout for SECONDS
"""

import json
import sys
import time

ADDRESS = "unix:/run/coalesced/io.coalesced"


def journal(system):
    return system.Stats()["stats"]["journal"]


def add(watches, unit, app, start):
    """Adds `watches` watches reading from `start` (an AddWatch start), each taking the entries of `unit` that
    contain "mark", all to `app`, on one connection."""
    import varlink

    with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.System") as system:
        for index in range(watches):
            system.AddWatch(
                {
                    "name": f"bench-{watches}-{index}",
                    "units": [unit],
                    "contains": "mark",
                    "kind": f"bench.read.{index}",
                    "to": app,
                },
                start,
            )


def poll(lines, matched):
    """Polls Stats every 10 ms until entriesRead reaches `lines` and matched reaches `matched`. Prints one JSON
    line: the wall-clock times (s since the epoch) of the first poll and of the polls that saw each, and the
    figures then."""
    import varlink

    interval = 0.01
    with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.System") as system:
        first = time.time()
        read = None
        deadline = time.monotonic() + 600
        while True:
            figures = journal(system)
            now = time.time()
            if read is None and figures["entriesRead"] >= lines:
                read = now
            if figures["matched"] >= matched:
                break
            if time.monotonic() > deadline:
                print(json.dumps({"error": "the reader did not finish in 600 s", "journal": figures}), flush=True)
                sys.exit(1)
            time.sleep(interval)
        print(json.dumps({"first": first, "read": read, "matched": now, "journal": figures, "interval": interval}), flush=True)


def remove(prefix):
    import varlink

    with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.System") as system:
        for watch in system.ListWatches()["watches"]:
            if watch["name"].startswith(prefix) and watch["origin"] == "runtime":
                system.RemoveWatch(watch["name"])


def app(name, kind, count, out):
    """The app: registers, attaches, acknowledges every callback at once, and for each event of `kind` writes
    `send journald receive` (µs since the epoch): the send time the line carries, the entry's
    __REALTIME_TIMESTAMP (when journald took it) and the time the event came off the stream. Ends after `count`."""
    import varlink

    received = 0
    with open(out, "w") as sink, varlink.Client(address=ADDRESS) as client, \
            client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
        requests.Register(name=name)
        for reply in stream.Attach(name, _more=True):
            callback = reply.get("callback")
            if callback is None:
                print("state", reply["state"], file=sink, flush=True)
                continue
            now = time.time_ns() // 1000
            if callback["kind"] == kind:
                payload = callback["payload"]
                sent = payload["MESSAGE"].split()[-1]
                print(sent, payload["__REALTIME_TIMESTAMP"], now, file=sink, flush=True)
                received += 1
            requests.Ack(name, callback["seq"])
            if received >= count:
                return


def rtt(seconds, interval, out):
    """Stats round trips on one connection, one every `interval` s for `seconds`; each in µs, one a line."""
    import varlink

    with open(out, "w") as sink, varlink.Client(address=ADDRESS) as client, \
            client.open("io.coalesced.System") as system:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter_ns()
            system.Stats()
            print((time.perf_counter_ns() - start) / 1000, file=sink)
            time.sleep(interval)


def flood(rate, seconds, out):
    """`rate` lines a second on stdout for `seconds`, 1/100 of them every 10 ms (blocking when journald does not
    keep up); the lines written and the time taken go to `out`."""
    chunk = rate // 100
    start = time.monotonic()
    written = 0
    tick = 0
    while time.monotonic() - start < seconds:
        sys.stdout.write("".join(f"flood line {written + i}\n" for i in range(chunk)))
        sys.stdout.flush()
        written += chunk
        tick += 1
        pause = start + tick * 0.01 - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    with open(out, "w") as sink:
        print(written, time.monotonic() - start, file=sink)


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "add":
        add(int(arguments[0]), arguments[1], arguments[2], arguments[3])
    elif command == "poll":
        poll(int(arguments[0]), int(arguments[1]))
    elif command == "remove":
        remove(arguments[0])
    elif command == "app":
        app(arguments[0], arguments[1], int(arguments[2]), arguments[3])
    elif command == "rtt":
        rtt(float(arguments[0]), float(arguments[1]), arguments[2])
    elif command == "flood":
        flood(int(arguments[0]), float(arguments[1]), arguments[2])
    else:
        sys.exit(f"journal-client.py: unknown command {command}")
