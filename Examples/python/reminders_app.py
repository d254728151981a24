"""A reminders app for coalesced, with the PyPI varlink package: when it first becomes active it schedules a
reminder for a second later, shows the reminder itself when it fires while the app is active, and prints the
user's answer."""
import os

import varlink

# $COALESCED_SOCKET, else the system instance's socket.
ADDRESS = "unix:" + os.environ.get("COALESCED_SOCKET", "/run/coalesced/io.coalesced")
APP = "org.example.reminders"

REMINDER = {
    "id": "tea",
    "trigger": {"after": 1},                        # or {"at": EPOCH_SECONDS}, or {"calendar": {"hour": 8, ...}}
    "content": {
        "title": "Tea is ready",
        "body": "Green tea, steeped 3 minutes",
        "actions": [{"id": "drink", "title": "Drink"}, {"id": "snooze", "title": "Snooze 5 min"}],
        "userInfo": {"pot": 2},                     # handed back with the response
    },
}

scheduled = False
with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.App") as requests, \
        client.open("io.coalesced.App") as stream, client.open("io.coalesced.Notifications") as notifications:
    requests.Register(name=APP)
    for reply in stream.Attach(APP, _more=True):
        callback = reply.get("callback")
        if callback is None:                        # the first reply says the state the app is in
            continue
        kind = callback["kind"]
        if kind == "lifecycle.didBecomeActive" and not scheduled:
            notifications.Schedule(APP, REMINDER)   # returns the next fire date, seconds since the epoch
            scheduled = True
            pending = notifications.ListPending(APP)["pending"]
            print(f"scheduled {', '.join(entry['request']['id'] for entry in pending)}", flush=True)
        elif kind == "notification.willPresent":   # it fired while the app is active: the app shows it
            presentation = callback["payload"]
            print(f"reminder {presentation['id']}: {presentation['content']['title']}", flush=True)
        elif kind == "notification.didReceiveResponse":
            response = callback["payload"]
            print(f"answered {response['id']} with {response['action']}, pot {response['userInfo']['pot']}", flush=True)
            if response["action"] == "snooze":
                notifications.Schedule(APP, dict(REMINDER, trigger={"after": 300}))
        elif kind == "lifecycle.willTerminate":
            print("terminating", flush=True)
            continue                                # not acknowledged: the stream ends, and the process exits
        requests.Ack(APP, callback["seq"])
print("exited", flush=True)
