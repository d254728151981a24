"""Local notifications (io.coalesced.Notifications) through the PyPI varlink package against the real daemon: an
attached Python app schedules with each trigger, lists its pending requests with their dates, receives
notification.willPresent while active, finds the presentation in its delivered list, and hears the user's
response; the errors carry their parameters."""

import contextlib
import os
import queue
import tempfile
import threading
import time

import pytest
import varlink

from test_varlink_client import daemon_in

APP = "org.example.reminders"


@pytest.fixture(scope="module")
def daemon():
    """A daemon that lets an app have 3 requests pending."""
    with tempfile.TemporaryDirectory(prefix="coalesced-py-") as directory:
        config = os.path.join(directory, "coalesced.conf")
        with open(config, "w") as file:
            file.write("[Notifications]\nPendingLimit=3\n")
        with daemon_in(directory, ["--config", config]) as address:
            yield address


class AttachedApp:
    """The app's stream read on a thread into a queue, so that every wait has a deadline; requests on their own
    connections."""

    def __init__(self, address, name):
        self.name = name
        self.client = varlink.Client(address=address)
        self.requests = self.client.open("io.coalesced.App")
        self.notifications = self.client.open("io.coalesced.Notifications")
        self.stream = self.client.open("io.coalesced.App")
        self.requests.Register(name=name)
        self.callbacks = queue.Queue()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        with contextlib.suppress(Exception):
            for reply in self.stream.Attach(self.name, _more=True):
                if reply.get("callback") is not None:
                    self.callbacks.put(reply["callback"])

    def next_of(self, kind, timeout=20):
        """The next callback of `kind`, acknowledging it and every one before it."""
        deadline = time.monotonic() + timeout
        while True:
            callback = self.callbacks.get(timeout=max(0.01, deadline - time.monotonic()))
            self.requests.Ack(self.name, callback["seq"])
            if callback["kind"] == kind:
                return callback

    def close(self):
        for connection in (self.stream, self.notifications, self.requests):
            connection.close()
        self.client.cleanup()


@pytest.fixture
def app(daemon):
    attached = AttachedApp(daemon, APP)
    yield attached
    attached.notifications.Cancel(APP, None, True)
    attached.notifications.RemoveDelivered(APP, None, True)
    attached.close()


def test_a_notification_fires_into_the_active_app_the_delivered_list_and_back_as_a_response(app):
    app.next_of("lifecycle.didBecomeActive")
    before = time.time()
    next_date = app.notifications.Schedule(APP, {
        "id": "tea",
        "trigger": {"after": 0.5},
        "content": {
            "title": "Tea is ready", "body": "Green, 3 minutes", "threadId": "kitchen",
            "actions": [{"id": "drink", "title": "Drink"}, {"id": "snooze", "title": "Snooze", "foreground": True}],
            "userInfo": {"pot": 2},
        },
    })["next"]
    assert before + 0.4 < next_date < before + 5
    pending = app.notifications.ListPending(APP)["pending"]
    assert [entry["request"]["id"] for entry in pending] in (["tea"], [])  # [] only when it fired already
    if pending:
        # An interval runs on the boot-time clock: its wall-clock date is worked out again for each answer.
        assert pending[0]["next"] == pytest.approx(next_date, abs=0.001)
        assert pending[0]["request"]["trigger"] == {"after": 0.5, "repeats": False}

    presented = app.next_of("notification.willPresent")["payload"]
    assert presented["app"] == APP and presented["id"] == "tea" and presented["serial"] == 1
    assert presented["content"]["title"] == "Tea is ready" and presented["content"]["userInfo"] == {"pot": 2}
    assert presented["count"] == 1 and presented["late"] is False and presented["style"] == "banner"
    assert presented["date"] == pytest.approx(next_date, abs=0.001)
    assert app.notifications.ListPending(APP)["pending"] == []
    delivered = app.notifications.ListDelivered(APP)
    assert delivered["delivered"] == [presented] and delivered["dropped"] == 0

    with pytest.raises(varlink.VarlinkError) as refused:
        app.notifications.Respond(APP, "tea", "spill", None)
    assert refused.value.error() == "io.coalesced.Notifications.UnknownAction"
    assert refused.value.parameters() == {"app": APP, "id": "tea", "action": "spill"}
    app.notifications.Respond(APP, "tea", "drink", "now")
    response = app.next_of("notification.didReceiveResponse")["payload"]
    assert response == {"id": "tea", "action": "drink", "text": "now", "userInfo": {"pot": 2}}
    # Answered, it leaves the delivered list, and is not answered twice.
    assert app.notifications.ListDelivered(APP)["delivered"] == []
    with pytest.raises(varlink.VarlinkError) as again:
        app.notifications.Respond(APP, "tea", "drink", None)
    assert again.value.error() == "io.coalesced.Notifications.UnknownNotification"
    assert again.value.parameters() == {"app": APP, "id": "tea"}
    # A typed reply is bounded: 4 KiB.
    app.notifications.Schedule(APP, {"id": "long", "content": {"title": "Long"}})
    app.next_of("notification.willPresent")
    with pytest.raises(varlink.VarlinkError) as long_text:
        app.notifications.Respond(APP, "long", "default", "x" * 4097)
    assert long_text.value.error() == "io.coalesced.Notifications.InvalidRequest"
    assert "4096" in long_text.value.parameters()["reason"]


def test_each_trigger_has_its_next_date_and_the_errors_say_why(daemon):
    with varlink.Client(address=daemon) as client, client.open("io.coalesced.App") as apps, \
            client.open("io.coalesced.Notifications") as notifications:
        apps.Register(name=APP)
        # Requests that are not requests say why.
        for request, why in [
            ({"id": "zone", "trigger": {"calendar": {"hour": 7, "timeZone": "Mars/Olympus_Mons"}}, "content": {"title": "Z"}},
             "Mars/Olympus_Mons"),
            ({"id": "both", "trigger": {"at": time.time(), "after": 5}, "content": {"title": "B"}}, "one of at, after and calendar"),
            ({"id": "style", "style": "shout", "content": {"title": "S"}}, "style"),
            # 31 April does not exist: skipped, so this calendar matches no date at all.
            ({"id": "april", "trigger": {"calendar": {"month": 4, "day": 31}}, "content": {"title": "A"}}, "matches no date"),
            ({"id": "fast", "trigger": {"after": 30, "repeats": True}, "content": {"title": "F"}}, "at least 60 seconds"),
            # A NUL would cut the id where the store keeps it: refused, with the character named.
            ({"id": "k\u0000a", "content": {"title": "N"}}, "U+0000 (NUL)"),
            ({"id": "thread", "content": {"title": "T", "threadId": "a\nb"}}, "threadId contains the control character U+000A"),
            # An instant long before 1970 would overflow the scheduler's arithmetic.
            ({"id": "old", "trigger": {"at": -8e9}, "content": {"title": "O"}}, "from 1970 on"),
        ]:
            with pytest.raises(varlink.VarlinkError) as invalid:
                notifications.Schedule(APP, request)
            assert invalid.value.error() == "io.coalesced.Notifications.InvalidRequest"
            parameters = invalid.value.parameters()
            assert parameters["app"] == APP and parameters["id"] == request["id"] and why in parameters["reason"]

        now = time.time()
        at = notifications.Schedule(APP, {"id": "at", "trigger": {"at": now + 3600}, "content": {"title": "At"}})["next"]
        after = notifications.Schedule(
            APP, {"id": "after", "trigger": {"after": 120, "repeats": True}, "content": {"title": "After"}, "late": "deliver"}
        )["next"]
        calendar = notifications.Schedule(APP, {
            "id": "calendar",
            "trigger": {"calendar": {"hour": 7, "minute": 15, "timeZone": "UTC"}, "repeats": True},
            "content": {"title": "Calendar"},
            "late": "dropAfter", "dropAfterSec": 600,
        })["next"]
        assert abs(at - (now + 3600)) < 0.001
        assert now + 119 < after < now + 130
        assert now < calendar <= now + 86400 and calendar % 86400 == 7 * 3600 + 15 * 60

        pending = notifications.ListPending(APP)["pending"]
        assert [entry["next"] for entry in pending] == pytest.approx(sorted([at, after, calendar]), abs=0.001)
        by_id = {entry["request"]["id"]: entry for entry in pending}
        assert by_id["calendar"]["calendar"] == "*-*-* 07:15:00 UTC"
        assert by_id["calendar"]["request"]["late"] == "dropAfter" and by_id["calendar"]["request"]["dropAfterSec"] == 600
        assert by_id["after"]["request"]["trigger"] == {"after": 120, "repeats": True}

        # PendingLimit=3: a fourth is refused with the limit and the count; replacing one is not.
        with pytest.raises(varlink.VarlinkError) as limited:
            notifications.Schedule(APP, {"id": "fourth", "content": {"title": "Fourth"}})
        assert limited.value.error() == "io.coalesced.Notifications.PendingLimit"
        assert limited.value.parameters() == {"app": APP, "limit": 3, "pending": 3}
        notifications.Schedule(APP, {"id": "at", "trigger": {"at": now + 7200}, "content": {"title": "At, later"}})

        with pytest.raises(varlink.VarlinkError) as unknown:
            notifications.ListPending("org.example.nobody")
        assert unknown.value.error() == "io.coalesced.Notifications.UnknownApp"
        assert notifications.Cancel(APP, None, True)["cancelled"] == 3
