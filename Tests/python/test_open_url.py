"""Opening a URL with an app from Python (io.coalesced.App.Open), through the PyPI varlink package against the real
daemon: the app that declares the scheme gets it at once while active, after its wake's callbacks while suspended,
and after its launch's callbacks, with the URL in its launch options, when it was not running."""

import textwrap

import pytest
import varlink

from test_lifecycle_scenario import APP, AppProcess, wait_for_state
from test_varlink_client import running_daemon

# The app: declares the x-pyapp scheme, prints each callback with its launch reason or its URL, acknowledges each.
OPENING_APP_SOURCE = textwrap.dedent(
    """
    import sys, varlink
    address, name = sys.argv[1], sys.argv[2]
    with varlink.Client(address=address) as client, \\
            client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
        requests.Register(name=name, urlSchemes=["x-pyapp"])
        for reply in stream.Attach(name, _more=True):
            callback = reply.get("callback")
            if callback is None:
                continue
            kind = callback["kind"].removeprefix("lifecycle.")
            options = callback.get("launchOptions")
            if options is not None:
                detail = options["reason"] + " " + (options.get("url") or {}).get("url", "-")
            elif kind == "openURL":
                detail = callback["payload"]["url"] + " " + str(callback["payload"]["opener"])
            else:
                detail = "-"
            print(kind, detail, flush=True)
            if kind != "willTerminate":
                requests.Ack(name, callback["seq"])
    """
)


class OpeningApp(AppProcess):
    def __init__(self, address):
        super().__init__(address, None, source=OPENING_APP_SOURCE)

    def heard(self, count, timeout=20):
        with self.ready:
            assert self.ready.wait_for(lambda: len(self.lines) >= count, timeout), self.lines
            return self.lines[:count]


@pytest.fixture
def address():
    with running_daemon() as address:
        yield address


def test_a_url_reaches_the_app_that_declares_its_scheme_active_suspended_and_not_running(address):
    with varlink.Client(address=address) as client, client.open("io.coalesced.App") as app_side, \
            client.open("io.coalesced.System") as system:
        with pytest.raises(varlink.VarlinkError) as refused:
            app_side.Open(url="x-pyapp:first")
        assert refused.value.error() == "io.coalesced.App.NoHandler"
        with pytest.raises(varlink.VarlinkError) as refused:
            app_side.Open(url="no scheme here")
        assert refused.value.error() == "org.varlink.service.InvalidParameter"

        app = OpeningApp(address)
        try:
            assert app.heard(3) == ["willFinishLaunching user -", "didFinishLaunching user -", "didBecomeActive -"]
            opened = app_side.Open(url="x-pyapp:active")
            assert (opened["app"], opened["state"], opened["launching"]) == (APP, "active", False)
            assert app.heard(4)[3] == "openURL x-pyapp:active 0"

            system.Deactivate(APP)
            wait_for_state(system, "suspended")
            app_side.Open(url="X-PyApp:suspended")
            assert app.heard(9)[4:] == ["willResignActive -", "didEnterBackground -", "willEnterForeground -",
                                        "didBecomeActive -", "openURL X-PyApp:suspended 0"]

            system.Terminate(APP)
            assert app.process.wait(timeout=20) == 0
        finally:
            app.process.kill()
        wait_for_state(system, "notRunning")

        opened = app_side.Open(url="x-pyapp:stopped")
        assert (opened["app"], opened["launching"]) == (APP, True)
        relaunched = OpeningApp(address)
        try:
            assert relaunched.heard(4) == ["willFinishLaunching url x-pyapp:stopped", "didFinishLaunching url x-pyapp:stopped",
                                           "didBecomeActive -", "openURL x-pyapp:stopped 0"]
        finally:
            relaunched.process.kill()
