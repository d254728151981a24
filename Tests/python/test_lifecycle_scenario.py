"""One whole app lifecycle driven from Python: the app is a Python process speaking Varlink with the PyPI
package, and the operator side is the same package calling io.coalesced.System. Nothing here is Swift."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import varlink

import tempfile

from test_varlink_client import daemon_in, running_daemon

APP = "org.example.pyapp"

# The app: registers, attaches, prints one line per reply, acknowledges each callback on a second connection,
# keeps its state on the way to the background, and exits when the daemon ends its stream.
APP_SOURCE = textwrap.dedent(
    """
    import json, sys, varlink
    address, name, note = sys.argv[1], sys.argv[2], sys.argv[3]
    with varlink.Client(address=address) as client, \\
            client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
        requests.Register(name=name)
        for reply in stream.Attach(name, _more=True):
            callback = reply.get("callback")
            if callback is None:
                print("state", reply["state"], flush=True)
                continue
            options = callback.get("launchOptions") or {}
            detail = options.get("restoredState", "-") if callback["kind"].startswith("lifecycle.") \
                else json.dumps(callback.get("payload"), sort_keys=True).replace(" ", "")
            print("callback", callback["kind"], reply["state"], detail, flush=True)
            if callback["kind"] == "lifecycle.didEnterBackground":
                requests.SaveState(name, note)
            if callback["kind"] != "lifecycle.willTerminate":
                requests.Ack(name, callback["seq"])
    print("stream ended", flush=True)
    """
)


# An app that outlives its daemon: when its stream ends it connects again until a daemon answers, and attaches
# again (the same process, so the daemon takes it up in its state).
RECONNECTING_APP_SOURCE = textwrap.dedent(
    """
    import sys, time, varlink
    address, name = sys.argv[1], sys.argv[2]
    registered = False
    while True:
        try:
            with varlink.Client(address=address) as client, \\
                    client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
                if not registered:
                    requests.Register(name=name)
                    registered = True
                for reply in stream.Attach(name, _more=True):
                    callback = reply.get("callback")
                    if callback is None:
                        print("state", reply["state"], flush=True)
                        continue
                    print("callback", callback["kind"], reply["state"], flush=True)
                    requests.Ack(name, callback["seq"])
        except Exception:
            pass
        print("stream ended", flush=True)
        time.sleep(0.05)
    """
)


class AppProcess:
    def __init__(self, address, note, source=APP_SOURCE):
        arguments = [address, APP, note] if source == APP_SOURCE else [address, APP]
        self.process = subprocess.Popen([sys.executable, "-c", source] + arguments, stdout=subprocess.PIPE, text=True)
        self.lines = []
        self.ready = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            with self.ready:
                self.lines.append(line.rstrip("\n"))
                self.ready.notify_all()

    def callbacks(self, count, timeout=20):
        with self.ready:
            assert self.ready.wait_for(
                lambda: len([l for l in self.lines if l.startswith("callback")]) >= count, timeout
            ), self.lines
            return [l.split()[1].removeprefix("lifecycle.") for l in self.lines if l.startswith("callback")][:count]


    def states(self, count, timeout=20):
        """The first `count` states the app was told when it attached."""
        with self.ready:
            assert self.ready.wait_for(
                lambda: len([l for l in self.lines if l.startswith("state")]) >= count, timeout
            ), self.lines
            return [l.split()[1] for l in self.lines if l.startswith("state")][:count]


@pytest.fixture
def address():
    with running_daemon() as address:
        yield address


def wait_for_state(system, state, timeout=20):
    deadline = time.monotonic() + timeout
    while system.GetApp(APP)["app"]["state"] != state:
        assert time.monotonic() < deadline, f"{APP} never reached {state}"
        time.sleep(0.02)


def calls(system):
    """How many calls the daemon has taken, counting this one's Stats."""
    return system.Stats()["stats"]["calls"]


def wait_for_calls(system, count, timeout=20):
    """Waits until the daemon has taken `count` calls beyond this wait's own Stats calls."""
    deadline = time.monotonic() + timeout
    polls = 1
    while calls(system) - polls < count:
        assert time.monotonic() < deadline, f"the daemon never took {count} calls"
        polls += 1
        time.sleep(0.01)


def test_a_python_app_lives_its_whole_lifecycle(address):
    with varlink.Client(address=address) as client, client.open("io.coalesced.System") as system:
        first = AppProcess(address, "page=7")
        assert first.callbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
        assert first.lines[0] == "state notRunning"
        wait_for_state(system, "active")

        assert system.Interrupt(phase="begin")["app"]["state"] == "inactive"
        system.Interrupt(phase="end")
        assert first.callbacks(5)[3:] == ["willResignActive", "didBecomeActive"]

        system.Deactivate()
        assert first.callbacks(7)[5:] == ["willResignActive", "didEnterBackground"]
        wait_for_state(system, "suspended")

        assert system.Purge()["purged"] == [APP]
        assert first.process.wait(timeout=10) == -signal.SIGKILL
        assert len(first.callbacks(7)) == 7 and not any("willTerminate" in l for l in first.lines)

        launched = {}
        with varlink.Client(address=address) as other, other.open("io.coalesced.System") as launcher:
            before = calls(system)
            waiter = threading.Thread(target=lambda: launched.update(launcher.Launch(APP)))
            waiter.start()
            # The app starts once the daemon has taken the Launch: attached before that, it would be running
            # already, and the Launch refused.
            wait_for_calls(system, before + 1)
            second = AppProcess(address, "unused")
            assert second.callbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
            assert second.lines[1].endswith(" page=7"), second.lines
            waiter.join(timeout=20)
        assert launched["app"]["state"] == "active"

        assert system.Terminate(APP)["app"]["state"] == "notRunning"
        assert second.callbacks(4)[3] == "willTerminate"
        assert second.process.wait(timeout=10) == 0
        assert second.lines[-1] == "stream ended"

        with pytest.raises(varlink.VarlinkError) as refused:
            system.Activate(APP)
        assert refused.value.error() == "io.coalesced.System.WrongState"


def test_events_are_held_while_suspended_and_arrive_coalesced(address):
    """Posting from Python to an app written in Python: one event per kind on wake, by the kinds' policies."""
    with varlink.Client(address=address) as client, \
            client.open("io.coalesced.System") as system, client.open("io.coalesced.App") as app_side:
        app_side.Register(name=APP, kinds={"badge": {"policy": "sum", "field": "unread"},
                                           "log.error": {"policy": "count"}})
        app = AppProcess(address, "-")
        assert app.callbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
        assert app_side.Post(target=APP, kind="mail.received", payload={"id": 1})["delivered"] is True
        system.Deactivate()
        wait_for_state(system, "suspended")
        for unread in (1, 2, 3):
            assert app_side.Post(target=APP, kind="badge", payload={"unread": unread})["delivered"] is False
        for line in ("a", "b"):
            app_side.Post(target=APP, kind="log.error", payload={"line": line})
        held = system.GetQueue(APP)
        assert [(h["kind"], h["count"]) for h in held["held"]] == [("badge", 3), ("log.error", 2)]

        system.Activate(APP)
        names = app.callbacks(10)
        assert names[3:] == ["mail.received", "willResignActive", "didEnterBackground", "willEnterForeground",
                             "didBecomeActive", "badge", "log.error"]
        lines = [l for l in app.lines if l.startswith("callback badge") or l.startswith("callback log.error")]
        assert lines == ['callback badge active {"unread":6}', "callback log.error active null"]
        with pytest.raises(varlink.VarlinkError) as refused:
            app_side.Post(target=APP, kind="Bad Kind", payload={})
        assert refused.value.error() == "io.coalesced.App.InvalidKind"


def test_a_graceful_restart_leaves_a_python_app_in_its_state():
    """SIGTERM (systemctl restart) and a new daemon on the same store: the app's process, still running and stopped
    (SIGSTOP) as the daemon suspended it, is taken up as it was; woken, it is continued, attaches again and hears
    the wake's callbacks, with no launch callbacks."""
    with tempfile.TemporaryDirectory(prefix="coalesced-py-") as directory:
        with daemon_in(directory) as address, varlink.Client(address=address) as client, \
                client.open("io.coalesced.System") as system:
            app = AppProcess(address, None, source=RECONNECTING_APP_SOURCE)
            try:
                assert app.callbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
                system.Deactivate()
                assert app.callbacks(5)[3:] == ["willResignActive", "didEnterBackground"]
                wait_for_state(system, "suspended")
                deadline = time.monotonic() + 20
                while system.GetApp(APP)["app"].get("suspendedAs") != "stopped":
                    assert time.monotonic() < deadline, f"{APP} was never stopped"
                    time.sleep(0.02)
            except BaseException:
                app.process.kill()
                raise
        try:
            with daemon_in(directory) as address, varlink.Client(address=address) as client, \
                    client.open("io.coalesced.System") as system:
                taken = system.GetApp(APP)["app"]
                assert (taken["state"], taken["pid"], taken["suspendedAs"]) == ("suspended", app.process.pid, "stopped")
                system.Activate(APP)
                # Attached again once continued, after the wake: its first reply says the state it woke into.
                assert app.states(2) == ["notRunning", "active"]
                assert app.callbacks(7)[5:] == ["willEnterForeground", "didBecomeActive"]
                assert "didFinishLaunching" not in app.callbacks(7)[2:]
        finally:
            app.process.kill()


class MonitorRecords:
    """A Monitor call on its own connection, read on a thread: each record as (name, record without its time)."""

    def __init__(self, client, **parameters):
        self.connection = client.open("io.coalesced.System")
        self.records = []
        self.started = threading.Event()
        self.ready = threading.Condition()
        self.replies = self.connection.Monitor(_more=True, **parameters)
        threading.Thread(target=self._read, daemon=True).start()
        assert self.started.wait(20), "the monitor never said it was in place"

    def _read(self):
        try:
            self._take(self.replies)
        except (BrokenPipeError, ConnectionError):
            pass  # the daemon stopped at the end of the test

    def _take(self, replies):
        for reply in replies:
            records = [(name, {k: v for k, v in record.items() if k != "time"})
                       for name, record in reply.items() if record is not None]
            if not records:
                self.started.set()
                continue
            with self.ready:
                self.records.extend(records)
                self.ready.notify_all()

    def until(self, condition, timeout=20):
        with self.ready:
            assert self.ready.wait_for(lambda: condition(self.records), timeout), self.records
            return list(self.records)


def test_a_monitor_streams_an_apps_traffic_to_python(address):
    """io.coalesced.System.Monitor through the parsed interface: one app's posts, deliveries, acknowledgements,
    attach and detach, with its transitions; another app's never."""
    with varlink.Client(address=address) as client, \
            client.open("io.coalesced.System") as system, client.open("io.coalesced.App") as app_side:
        app_side.Register(name=APP, kinds={"badge": {"policy": "sum", "field": "unread"}})
        app_side.Register(name="org.example.elsewhere")
        monitor = MonitorRecords(client, apps=[APP], watch=["transitions", "traffic"])
        app = AppProcess(address, "-")
        assert app.callbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
        system.Deactivate()
        wait_for_state(system, "suspended")
        for unread in (1, 2):
            assert app_side.Post(target=APP, kind="badge", payload={"unread": unread})["delivered"] is False
        app_side.Post(target="org.example.elsewhere", kind="badge", payload={"unread": 9})
        system.Activate(APP)
        assert app.callbacks(8)[7] == "badge"
        system.Terminate(APP)
        assert app.process.wait(timeout=10) == 0

        records = monitor.until(lambda records: any(name == "detach" for name, _ in records))
        names = [name for name, _ in records]
        assert names[0] == "attach" and records[0][1]["pid"] == app.process.pid
        posts = [record for name, record in records if name == "post"]
        assert posts == [{"target": APP, "app": APP, "kind": "badge", "delivered": False, "uid": os.getuid()}] * 2
        deliveries = [record for name, record in records if name == "delivery"]
        assert [(d["kind"], d["count"]) for d in deliveries] == [("badge", 2)]
        # The app acknowledges each callback as it comes: the delivery's number, after it.
        acknowledgement = ("acknowledgement", {"app": APP, "seq": deliveries[0]["seq"]})
        assert acknowledgement in records and records.index(acknowledgement) > names.index("delivery")
        assert [record for name, record in records if name == "detach"] == [{"app": APP, "pid": app.process.pid}]
        assert all(record["app"] == APP for _, record in records)
        transitions = [(r["from"], r["to"]) for name, r in records if name == "transition"]
        assert transitions[:2] == [("notRunning", "inactive"), ("inactive", "active")]


def test_a_waking_kind_wakes_a_suspended_python_app_into_the_background(address):
    """A kind declared wakes: background (content-available): the suspended app runs in the background for what it
    held, with no willEnterForeground, and is suspended again once it has acknowledged it."""
    with varlink.Client(address=address) as client, \
            client.open("io.coalesced.System") as system, client.open("io.coalesced.App") as app_side:
        app_side.Register(name=APP, kinds={"badge": {"policy": "sum", "field": "unread", "wakes": "background"},
                                           "log.error": {"policy": "count"}})
        app = AppProcess(address, "-")
        assert app.callbacks(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
        assert app_side.GetBackgroundTimeRemaining(APP)["remainingSec"] == 30.0
        system.Deactivate()
        wait_for_state(system, "suspended")
        with pytest.raises(varlink.VarlinkError) as refused:
            app_side.GetBackgroundTimeRemaining(APP)
        assert refused.value.error() == "io.coalesced.App.WrongState"
        assert app_side.Post(target=APP, kind="log.error", payload={"line": "a"})["delivered"] is False
        assert system.GetApp(APP)["app"]["state"] == "suspended"
        explained = system.Explain(APP)
        assert explained["state"] == "suspended" and explained["reason"] == "backgroundWorkDone"
        assert [r["code"] for r in explained["because"]] == ["suspended", "holds", "wakesOn"]
        assert "badge" in explained["because"][2]["text"]

        app_side.Post(target=APP, kind="badge", payload={"unread": 2})
        woken = app.callbacks(7)
        assert woken[:5] == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive", "willResignActive",
                             "didEnterBackground"]
        assert sorted(woken[5:]) == ["badge", "log.error"]
        lines = [l for l in app.lines if l.startswith("callback badge") or l.startswith("callback log.error")]
        assert sorted(lines) == ['callback badge background {"unread":2}', "callback log.error background null"]
        wait_for_state(system, "suspended")
        assert not [l for l in app.lines if "willEnterForeground" in l], app.lines

        with pytest.raises(varlink.VarlinkError) as refused:
            app_side.Register(name=APP, kinds={"badge": {"policy": "latest", "wakes": "foreground"}})
        assert refused.value.error() == "io.coalesced.App.InvalidPolicy"
        assert "background" in refused.value.parameters()["reason"]
