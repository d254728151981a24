"""Journal watches (io.coalesced.System AddWatch, ListWatches, RemoveWatch) through the PyPI varlink package against
the real daemon, with the package's parsed interface: a watch is added, listed with its definition and figures,
refused with InvalidWatch and its parameters, and removed. The host may have no journald: the reader then finds
no entries, which these calls do not need."""

import tempfile

import pytest
import varlink

from test_varlink_client import daemon_in

APP = "org.example.watched"


@pytest.fixture(scope="module")
def daemon():
    with tempfile.TemporaryDirectory(prefix="coalesced-py-") as directory:
        with daemon_in(directory) as address:
            with varlink.Client(address=address) as client, client.open("io.coalesced.App") as app:
                app.Register(APP, None, None, None)
            yield address


def test_a_watch_is_added_listed_and_removed(daemon):
    definition = {
        "name": "py-errors",
        "units": ["nginx.service"],
        "priority": "warning",
        "matches": ["_TRANSPORT=journal"],
        "contains": "failed",
        "kind": "server.error",
        "to": APP,
        "policy": "queue:20",
    }
    with varlink.Client(address=daemon) as client, client.open("io.coalesced.System") as system:
        system.AddWatch(definition, "tail")
        listed = {watch["name"]: watch for watch in system.ListWatches()["watches"]}
        journal = system.Stats()["stats"]["journal"]
        system.RemoveWatch("py-errors")
        after = [watch["name"] for watch in system.ListWatches()["watches"]]
        with pytest.raises(varlink.VarlinkError) as again:
            system.RemoveWatch("py-errors")
    watch = listed["py-errors"]
    for member, value in definition.items():
        assert watch[member] == value, member
    assert watch["fields"] == ["MESSAGE", "PRIORITY", "_SYSTEMD_UNIT", "_PID", "__REALTIME_TIMESTAMP", "__CURSOR"]
    assert watch["origin"] == "runtime"
    assert watch["owner"] == 0
    assert (watch["matched"], watch["posts"], watch["refused"], watch["untested"]) == (0, 0, 0, 0)
    assert watch.get("lastMatched") is None
    assert journal["watches"] == 1
    assert isinstance(journal["followed"], bool)
    assert "py-errors" not in after
    assert again.value.error() == "io.coalesced.System.NoSuchWatch"
    assert again.value.parameters() == {"watch": "py-errors", "reason": "no watch has that name"}


@pytest.mark.parametrize("member, value, reason", [
    ("grep", "(", "the regular expression /(/ cannot be used: missing closing parenthesis (at byte 1)"),
    # Nested repetitions, which would take glibc gigabytes, are too large for PCRE2 to compile.
    ("grep", "((a{1,100}){1,100}){1,100}", "the regular expression /((a{1,100}){1,100}){1,100}/ cannot be used: regular expression is too large"),
    ("priority", "loud", "priority 'loud' is not one of emerg, alert, crit, err, warning, notice, info, debug or 0-7"),
    ("to", "org.example.absent", "no app org.example.absent is registered"),
])
def test_an_invalid_watch_is_refused_with_its_name_and_reason(daemon, member, value, reason):
    definition = {"name": "py-invalid", "kind": "k", "to": APP, member: value}
    with varlink.Client(address=daemon) as client, client.open("io.coalesced.System") as system:
        with pytest.raises(varlink.VarlinkError) as refused:
            system.AddWatch(definition, None)
        listed = [watch["name"] for watch in system.ListWatches()["watches"]]
    assert refused.value.error() == "io.coalesced.System.InvalidWatch"
    parameters = refused.value.parameters()
    assert parameters["watch"] == "py-invalid"
    assert parameters["reason"].startswith(reason), parameters["reason"]
    assert "py-invalid" not in listed


def test_a_name_taken_is_refused_with_watch_exists(daemon):
    with varlink.Client(address=daemon) as client, client.open("io.coalesced.System") as system:
        system.AddWatch({"name": "py-twice", "kind": "k", "to": APP}, None)
        with pytest.raises(varlink.VarlinkError) as refused:
            system.AddWatch({"name": "py-twice", "kind": "other", "to": APP}, "head")
        kinds = [watch["kind"] for watch in system.ListWatches()["watches"] if watch["name"] == "py-twice"]
        system.RemoveWatch("py-twice")
    assert refused.value.error() == "io.coalesced.System.WatchExists"
    assert refused.value.parameters() == {"watch": "py-twice"}
    assert kinds == ["k"], "the first one is kept"
