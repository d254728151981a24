"""A notes app for coalesced, with the PyPI varlink package: it keeps a count of unread notes, which producers
raise by posting badge events, and saves it on its way to the background."""
import os
import threading

import varlink

# $COALESCED_SOCKET, else the system instance's socket.
ADDRESS = "unix:" + os.environ.get("COALESCED_SOCKET", "/run/coalesced/io.coalesced")
APP = "org.example.notes"


def save_in_background(task, unread):
    # On a connection of its own: the stream occupies one, and the loop below uses the other.
    with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.App") as requests:
        requests.SaveState(APP, str(unread))        # handed back by the next launch
        print(f"saved unread={unread}", flush=True)
        requests.EndBackgroundTask(APP, task)


unread = 0
with varlink.Client(address=ADDRESS) as client, \
        client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
    requests.Register(name=APP, kinds={"badge": {"policy": "sum", "field": "unread"}})
    for reply in stream.Attach(APP, _more=True):
        callback = reply.get("callback")
        if callback is None:                        # the first reply says the state the app is in
            continue
        kind = callback["kind"]
        if kind == "lifecycle.didFinishLaunching":
            options = callback["launchOptions"]
            unread = int(options.get("restoredState") or 0)
            print(f"launched {options['destination']} unread={unread}", flush=True)
        elif kind == "lifecycle.didBecomeActive":
            print("active", flush=True)
        elif kind == "lifecycle.willResignActive":
            print("inactive", flush=True)
        elif kind == "lifecycle.didEnterBackground":
            print("background", flush=True)
            # Keeps the app running in the background until the task ends; then it is suspended.
            task = requests.BeginBackgroundTask(APP, "save-notes")["id"]
            threading.Thread(target=save_in_background, args=(task, unread)).start()
        elif kind == "lifecycle.willEnterForeground":
            print("foreground", flush=True)
        elif kind == "lifecycle.willTerminate":
            print("terminating", flush=True)
            continue                                # not acknowledged: the stream ends, and the process exits
        elif kind == "badge":
            added = callback["payload"]["unread"]
            unread += added
            print(f"badge +{added} from {callback['count']} posts, unread={unread}", flush=True)
        requests.Ack(APP, callback["seq"])          # handled: meets the deadlines of the callbacks that have one
print("exited", flush=True)
