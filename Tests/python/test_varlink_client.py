"""The Python varlink package (PyPI), a third-party client, against the real daemon."""

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import varlink

ROOT = pathlib.Path(__file__).resolve().parents[2]
INTERFACES = ROOT / "Sources" / "CoalesceServer" / "Interfaces"


def daemon_binary():
    override = os.environ.get("COALESCED_BIN")
    if override:
        return override
    bin_path = subprocess.run(
        ["swift", "build", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    return os.path.join(bin_path, "coalesced")


@contextlib.contextmanager
def running_daemon(arguments=()):
    """The real daemon on a socket in a temporary directory, with `arguments` added to its command line, ready
    (READY=1) when this yields its address; stopped with SIGTERM afterwards, which must end it with status 0."""
    with tempfile.TemporaryDirectory(prefix="coalesced-py-") as directory:
        with daemon_in(directory, arguments) as address:
            yield address


@contextlib.contextmanager
def daemon_in(directory, arguments=()):
    """The real daemon with its socket and state in `directory` (a second one there takes up the first's store),
    ready when this yields its address; stopped with SIGTERM afterwards, which must end it with status 0."""
    sock = os.path.join(directory, "io.coalesced")
    notify_path = os.path.join(directory, "notify")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(notify_path)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET=notify_path, SWIFT_BACKTRACE="enable=no")
    process = subprocess.Popen(
        [daemon_binary(), "--socket", sock, "--state-dir", os.path.join(directory, "state"), "--config", "/dev/null",
         *arguments],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if b"READY=1" in notify.recv(4096).split(b"\n"):
                break
        yield f"unix:{sock}"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        notify.close()


@pytest.fixture(scope="module")
def daemon():
    with running_daemon() as address:
        yield address


def test_get_info_lists_every_interface(daemon):
    with varlink.Client(address=daemon) as client, client.open("org.varlink.service") as service:
        info = service.GetInfo()
    assert info["product"] == "coalesced"
    assert info["interfaces"] == [
        "io.coalesced.App", "io.coalesced.Notifications", "io.coalesced.Protocol", "io.coalesced.Screen",
        "io.coalesced.System", "org.varlink.service"
    ]


@pytest.mark.parametrize(
    "interface",
    ["io.coalesced.App", "io.coalesced.System", "io.coalesced.Protocol", "io.coalesced.Notifications", "io.coalesced.Screen"],
)
def test_interface_descriptions_are_the_repository_files_and_parse(daemon, interface):
    with varlink.Client(address=daemon) as client, client.open("org.varlink.service") as service:
        text = service.GetInterfaceDescription(interface)["description"]
    assert text == (INTERFACES / f"{interface}.varlink").read_text()
    parsed = varlink.Interface(text)  # the package's own parser of the interface language
    assert parsed.name == interface


def test_stats_through_the_parsed_interface(daemon):
    with varlink.Client(address=daemon) as client, client.open("io.coalesced.System") as system:
        stats = system.Stats()["stats"]
    assert stats["version"] == "0.1.0"
    assert stats["connections"] >= 1
    assert stats["limits"]["maxMessageSize"] == 1048576
    assert isinstance(stats["uptimeSec"], float)


def test_unknown_method_is_a_varlink_error(daemon):
    with varlink.Client(address=daemon) as client, client.open_connection() as connection:
        connection.sendall(b'{"method":"io.coalesced.System.Nope"}\0')
        reply = b""
        while not reply.endswith(b"\0"):
            reply += connection.recv(4096)
    assert b'"error":"org.varlink.service.MethodNotFound"' in reply


def test_register_then_list_through_the_parsed_interfaces(daemon):
    with varlink.Client(address=daemon) as client:
        with client.open("io.coalesced.App") as app:
            registered = app.Register("org.example.python", ["audio"], None, None)["app"]
        with client.open("io.coalesced.System") as system:
            listed = system.ListApps()["apps"]
            with pytest.raises(varlink.VarlinkError) as refused:
                system.GetApp("org.example.absent")
    assert registered["name"] == "org.example.python"
    assert registered["state"] == "notRunning"
    assert registered["backgroundModes"] == ["audio"]
    assert [entry["name"] for entry in listed] == ["org.example.python"]
    assert refused.value.error() == "io.coalesced.System.NoSuchApp"


@pytest.fixture(scope="module")
def own_daemon():
    """A daemon of their own for the tests that register apps after the listing above."""
    with running_daemon() as address:
        yield address


def exchange(connection, message):
    """Sends one call on a connection the varlink package opened, and returns its reply as the package reads it."""
    connection.sendall(json.dumps(message).encode() + b"\0")
    reply = b""
    while not reply.endswith(b"\0"):
        chunk = connection.recv(4096)
        assert chunk, "the daemon closed the connection"
        reply += chunk
    return json.loads(reply[:-1])


def refusal(address, message):
    """The error a call gets, as the varlink package's error type and the raw reply (whose members the package's
    InvalidParameter does not keep)."""
    with varlink.Client(address=address) as client, client.open_connection() as connection:
        reply = exchange(connection, message)
    assert "error" in reply, reply
    return varlink.VarlinkError.new(reply), reply["parameters"]


# The varlink package checks a struct's members itself before sending, so these calls are written out as JSON: as
# any other client, or a hostile one, may send them.
def test_a_posters_member_of_another_type_is_refused_with_its_path_and_why(own_daemon):
    error, parameters = refusal(own_daemon, {
        "method": "io.coalesced.App.Register",
        "parameters": {"name": "org.example.typed", "posters": {"anyone": "yes"}},
    })
    assert isinstance(error, varlink.InvalidParameter)
    assert error.parameters()["parameter"] == "posters.anyone"
    assert parameters == {"parameter": "posters.anyone", "reason": "expected a bool, got a string"}
    with varlink.Client(address=own_daemon) as client, client.open("io.coalesced.System") as system:
        assert "org.example.typed" not in [app["name"] for app in system.ListApps()["apps"]]


def test_a_policy_member_of_another_type_is_refused_on_post(own_daemon):
    with varlink.Client(address=own_daemon) as client, client.open("io.coalesced.App") as app:
        app.Register("org.example.poster", None, None, None)
    error, parameters = refusal(own_daemon, {
        "method": "io.coalesced.App.Post",
        "parameters": {"target": "org.example.poster", "kind": "mail", "payload": {},
                       "policy": {"policy": "latest", "backgroundMode": 3}},
    })
    assert error.error() == "org.varlink.service.InvalidParameter"
    assert parameters == {"parameter": "policy.backgroundMode", "reason": "expected a string, got an int"}


def test_upgrade_is_a_message_field_answered_as_not_supported(own_daemon):
    with varlink.Client(address=own_daemon) as client, client.open_connection() as connection:
        reply = exchange(connection, {"method": "io.coalesced.System.Stats", "upgrade": True})
        again = exchange(connection, {"method": "io.coalesced.System.Stats"})
    assert reply == {"error": "io.coalesced.Protocol.UpgradeNotSupported",
                     "parameters": {"method": "io.coalesced.System.Stats"}}
    assert again["parameters"]["stats"]["version"] == "0.1.0", "the connection is still a Varlink connection"


def test_a_configuration_line_with_a_nul_is_shown_whole_with_its_line_number():
    with tempfile.TemporaryDirectory(prefix="coalesced-py-") as directory:
        config = os.path.join(directory, "coalesced.conf")
        with open(config, "wb") as file:
            file.write(b"[Apps]\nMaxApps=5\0x\n")
        result = subprocess.run(
            [daemon_binary(), "--socket", os.path.join(directory, "io.coalesced"),
             "--state-dir", os.path.join(directory, "state"), "--config", config],
            env=dict(os.environ, SWIFT_BACKTRACE="enable=no"), capture_output=True, timeout=30,
        )
    assert result.returncode == 78
    assert f"{config}:2: NUL byte in line 'MaxApps=5\\0x'; a configuration file is text".encode() in result.stderr, \
        result.stderr


def test_a_policy_that_is_not_one_is_refused_with_invalid_policy_and_its_reason(own_daemon):
    """The package surfaces the daemon's own errors with their parameters: the kind and the reason."""
    with varlink.Client(address=own_daemon) as client, client.open("io.coalesced.App") as app:
        with pytest.raises(varlink.VarlinkError) as refused:
            app.Register("org.example.policies", None, None, None, {"mail": {"policy": "lastest"}})
        with pytest.raises(varlink.VarlinkError) as unbounded:
            app.Register("org.example.policies", None, None, None, {"log": {"policy": "queue"}})
    assert refused.value.error() == "io.coalesced.App.InvalidPolicy"
    assert refused.value.parameters() == {
        "kind": "mail",
        "reason": "'lastest' is not a policy: latest, first, count, sum (with field), merge, netChange or queue "
                  "(with bound)",
    }
    assert unbounded.value.error() == "io.coalesced.App.InvalidPolicy"
    assert unbounded.value.parameters() == {"kind": "log", "reason": "queue needs a bound, such as 10"}
    with varlink.Client(address=own_daemon) as client, client.open("io.coalesced.System") as system:
        assert "org.example.policies" not in [entry["name"] for entry in system.ListApps()["apps"]]


def test_no_deadlines_shows_every_deadline_as_null_in_stats():
    """Infinity travels as null, which the package's parsed interface takes for ?float."""
    with running_daemon(["--no-deadlines"]) as address:
        with varlink.Client(address=address) as client, client.open("io.coalesced.System") as system:
            limits = system.Stats()["stats"]["limits"]
    assert limits.get("acknowledgeTimeoutSec") is None
    assert limits.get("backgroundTaskBudgetSec") is None
    assert limits.get("launchTimeoutSec") is None
    assert limits["maxMessageSize"] == 1048576
