"""A notes app with two windows for coalesced, with Tk and the PyPI varlink package: each window is a scene, and
shows the state its scene is in. Run it in an X session whose windows coalesce-screen-agent follows; the windows'
class is the app's name, and this process, which shows them, is the one that attaches."""
import os
import queue
import threading
import tkinter

import varlink

# $COALESCED_SOCKET, else the system instance's socket.
ADDRESS = "unix:" + os.environ.get("COALESCED_SOCKET", "/run/coalesced/io.coalesced")
APP = "org.example.notes"
SCENE_STATES = {
    "scene.willConnect": "connected", "scene.willEnterForeground": "on screen", "scene.didBecomeActive": "active",
    "scene.willResignActive": "inactive", "scene.didEnterBackground": "background", "scene.didDisconnect": "gone",
}

root = tkinter.Tk()
root.withdraw()                                     # Tk's own window is none of the app's
labels = {}
for title in ("Inbox", "Draft"):
    window = tkinter.Toplevel(root, class_=APP)     # WM_CLASS: what the agent reports as the app id
    window.title(title)
    labels[title] = tkinter.Label(window, text="not connected", width=40)
    labels[title].pack(padx=20, pady=20)

callbacks = queue.Queue()                           # Tk is not thread-safe: the stream's thread hands over


def stream():
    with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.App") as app:
        for reply in app.Attach(APP, _more=True):
            if "callback" in reply:
                callbacks.put(reply["callback"])
    callbacks.put(None)


titles = {}                                         # scene id → the window's title, from its willConnect
with varlink.Client(address=ADDRESS) as client, client.open("io.coalesced.App") as requests:
    requests.Register(name=APP)

    def handle():
        while not callbacks.empty():
            callback = callbacks.get()
            if callback is None:
                print("exited", flush=True)
                root.destroy()
                return
            kind = callback["kind"]
            if kind == "scene.willConnect":
                titles[callback["scene"]] = callback.get("title", "")
            if kind in SCENE_STATES:
                title = titles.get(callback["scene"], callback["scene"])
                if title in labels:
                    labels[title].config(text=f"{title}: {SCENE_STATES[kind]}")
                print(f"{kind} {title}", flush=True)
            else:
                print(kind, flush=True)
            if kind != "lifecycle.willTerminate":
                requests.Ack(APP, callback["seq"])  # handled: meets the deadlines of the callbacks that have one
        root.after(20, handle)

    threading.Thread(target=stream, daemon=True).start()
    root.after(20, handle)
    root.mainloop()
