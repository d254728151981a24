"""The Python varlink package (PyPI), a third-party client, against the real daemon."""

import contextlib
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
def running_daemon():
    """The real daemon on a socket in a temporary directory, ready (READY=1) when this yields its address; stopped
    with SIGTERM afterwards, which must end it with status 0."""
    with tempfile.TemporaryDirectory(prefix="coalesced-py-") as directory:
        with daemon_in(directory) as address:
            yield address


@contextlib.contextmanager
def daemon_in(directory):
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
        [daemon_binary(), "--socket", sock, "--state-dir", os.path.join(directory, "state"), "--config", "/dev/null"],
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
        "io.coalesced.App", "io.coalesced.Protocol", "io.coalesced.System", "org.varlink.service"
    ]


@pytest.mark.parametrize("interface", ["io.coalesced.App", "io.coalesced.System", "io.coalesced.Protocol"])
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
