"""Scenes from Python: an app written in Python hears its windows' scene callbacks, and follows them, as the
session's follower reports them through io.coalesced.Screen with the PyPI varlink package."""

import sys
import textwrap

import pytest
import varlink

from test_lifecycle_scenario import APP, AppProcess, wait_for_state
from test_varlink_client import running_daemon

# The app: registers, attaches, prints each callback (a scene's with its id and what it restores), acknowledges.
SCENE_APP_SOURCE = textwrap.dedent(
    """
    import sys, varlink
    address, name = sys.argv[1], sys.argv[2]
    with varlink.Client(address=address) as client, \\
            client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
        requests.Register(name=name)
        for reply in stream.Attach(name, _more=True):
            callback = reply.get("callback")
            if callback is None:
                print("state", reply["state"], flush=True)
                continue
            kind = callback["kind"]
            scene = callback.get("scene", "-")
            print("callback", kind, reply["state"], scene, callback.get("restoredState", "-"), flush=True)
            requests.Ack(name, callback["seq"])
    print("stream ended", flush=True)
    """
)


class SceneApp(AppProcess):
    def __init__(self, address):
        super().__init__(address, "-", source=SCENE_APP_SOURCE)

    def heard(self, count, timeout=20):
        """The first `count` callbacks: `didBecomeActive` for the app's, `w1 didBecomeActive` for a scene's."""
        with self.ready:
            assert self.ready.wait_for(
                lambda: len([l for l in self.lines if l.startswith("callback")]) >= count, timeout
            ), self.lines
            heard = []
            for line in [l for l in self.lines if l.startswith("callback")][:count]:
                _, kind, _, scene, _ = line.split()
                heard.append(f"{scene} {kind.removeprefix('scene.')}" if kind.startswith("scene.")
                             else kind.removeprefix("lifecycle."))
            return heard


def window(id, presentation, pid=None, title="Inbox"):
    window = {"id": id, "appId": APP, "presentation": presentation, "title": title}
    if pid is not None:
        window["pid"] = pid
    return window


@pytest.fixture
def address():
    with running_daemon() as address:
        yield address


def test_windows_reported_drive_a_python_apps_scenes_and_the_app(address):
    with varlink.Client(address=address) as client, client.open("io.coalesced.Screen") as screen, \
            client.open("io.coalesced.System") as system, client.open("io.coalesced.App") as app_side:
        app = SceneApp(address)
        assert app.heard(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"]
        system.Deactivate()
        wait_for_state(system, "suspended")
        pid = app.process.pid

        matched = screen.ReportWindows("wayland", [window("w1", "focused", pid), window("w2", "shown")])
        assert matched["windows"] == [{"window": "w1", "app": APP}, {"window": "w2", "app": APP}]
        assert app.heard(12)[5:] == [
            "willEnterForeground", "w1 willConnect", "w1 willEnterForeground", "didBecomeActive", "w1 didBecomeActive",
            "w2 willConnect", "w2 willEnterForeground",
        ]
        wait_for_state(system, "active")

        # What the app saves for w1 comes back when w1 connects again.
        app_side.SaveSceneState(APP, "w1", "draft-3")
        screen.ReportWindows("wayland", [window("w2", "hidden")])
        assert app.heard(18)[12:] == [
            "w1 willResignActive", "willResignActive", "w1 didEnterBackground", "w1 didDisconnect",
            "w2 didEnterBackground", "didEnterBackground",
        ]
        wait_for_state(system, "suspended")
        # Held while it runs no code: what its scenes were told meanwhile comes after the wake's own callback.
        screen.ReportWindows("wayland", [window("w1", "focused", pid)])
        assert app.heard(24)[18:] == [
            "willEnterForeground", "w2 didDisconnect", "w1 willConnect", "w1 willEnterForeground", "didBecomeActive",
            "w1 didBecomeActive",
        ]
        connects = [l.split() for l in app.lines if " scene.willConnect " in l and " w1 " in l]
        assert [c[-1] for c in connects] == ["-", "draft-3"], app.lines
        wait_for_state(system, "active")

        # Another process's window only claims the app's id; a window of no app is none.
        matched = screen.ReportWindows("x11", [window("x", "focused", pid=1), {**window("y", "focused"), "appId": "org.example.none"}])
        assert matched["windows"] == [{"window": "x", "refused": "notTheAppsProcess"}, {"window": "y", "refused": "noApp"}]


def test_a_window_that_cannot_be_one_is_refused_naming_it(address):
    with varlink.Client(address=address) as client, client.open("io.coalesced.Screen") as screen:
        with pytest.raises(varlink.VarlinkError) as refused:
            screen.ReportWindows("wayland", [window("w1", "focused"), window("w2", "maximized")])
        assert refused.value.error() == "io.coalesced.Screen.InvalidWindow"
        assert refused.value.parameters()["index"] == 1
        assert "maximized" in refused.value.parameters()["reason"]
        with pytest.raises(varlink.VarlinkError) as refused:
            screen.ReportWindows("wayland", [window("w1", "shown"), window("w1", "hidden")])
        assert "twice" in refused.value.parameters()["reason"]
        with pytest.raises(varlink.VarlinkError) as refused:
            screen.ReportWindows("system", [])
        assert refused.value.error() == "org.varlink.service.InvalidParameter"
