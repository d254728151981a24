"""Background refreshes from Python (io.coalesced.App.ScheduleRefresh and the rest), through the PyPI varlink
package against the real daemon: a running app gets its refresh's event at once, says it is done, and the schedule
says what became of it; bad requests are refused with the parameter and why."""

import textwrap
import time

import pytest
import varlink

from test_lifecycle_scenario import APP, AppProcess
from test_varlink_client import running_daemon

# The app: prints each event's kind and payload id, says each refresh is done, acknowledges everything.
REFRESHING_APP_SOURCE = textwrap.dedent(
    """
    import sys, varlink
    address, name = sys.argv[1], sys.argv[2]
    with varlink.Client(address=address) as client, \\
            client.open("io.coalesced.App") as requests, client.open("io.coalesced.App") as stream:
        requests.Register(name=name)
        for reply in stream.Attach(name, _more=True):
            callback = reply.get("callback")
            if callback is None:
                continue
            if callback["kind"] == "lifecycle.backgroundRefresh":
                payload = callback["payload"]
                print("refresh", payload["id"], int(payload["budgetSec"]), flush=True)
                requests.RefreshDone(name, payload["id"], True)
            requests.Ack(name, callback["seq"])
    """
)


@pytest.fixture
def address():
    with running_daemon() as address:
        yield address


def test_a_running_app_gets_its_refresh_at_once_and_says_it_is_done(address):
    app = AppProcess(address, None, source=REFRESHING_APP_SOURCE)
    try:
        with varlink.Client(address=address) as client, client.open("io.coalesced.App") as requests:
            deadline = time.monotonic() + 20
            while True:
                try:
                    requests.ListRefreshes(APP)
                    break
                except varlink.VarlinkError:
                    assert time.monotonic() < deadline, "the app never registered"
                    time.sleep(0.02)
            with pytest.raises(varlink.VarlinkError) as refused:
                requests.ScheduleRefresh(app=APP, id="sync", requires=["wifi"])
            assert refused.value.error() == "org.varlink.service.InvalidParameter"
            assert refused.value.parameters()["parameter"] == "requires[0]"
            with pytest.raises(varlink.VarlinkError) as refused:
                requests.ScheduleRefresh(app=APP, id="sync", earliest=1e300)
            assert refused.value.parameters()["parameter"] == "earliest"
            with pytest.raises(varlink.VarlinkError) as refused:
                requests.ScheduleRefresh(app=APP, id="sync", budgetSec=0.0001)
            assert refused.value.parameters()["parameter"] == "budgetSec"
            with pytest.raises(varlink.VarlinkError) as refused:
                requests.ScheduleRefresh(app=APP, id="sync", intervalSec=60)
            assert refused.value.error() == "io.coalesced.App.InvalidRefresh"
            assert "MinIntervalSec=" in refused.value.parameters()["reason"]

            scheduled = requests.ScheduleRefresh(app=APP, id="sync", after=0, flexSec=0, budgetSec=7)["refresh"]
            assert (scheduled["id"], scheduled["budgetSec"], scheduled["waitingFor"]) == ("sync", 7, [])
            with app.ready:
                assert app.ready.wait_for(lambda: "refresh sync 7" in app.lines, 20), app.lines
            deadline = time.monotonic() + 20
            while requests.ListRefreshes(APP)["refreshes"]:
                assert time.monotonic() < deadline, "the done refresh stayed"
                time.sleep(0.02)
            with pytest.raises(varlink.VarlinkError) as refused:
                requests.RefreshDone(APP, "sync", True)
            assert refused.value.error() == "io.coalesced.App.NoSuchRefresh"
    finally:
        app.process.kill()
