import Varlink

/// Sway's layout tree (its IPC's GET_TREE) read as the session's windows: each view is one, focused when it has the
/// focus, shown when it is on a workspace its output shows, hidden otherwise (another workspace, the scratchpad).
enum SwayTree {
    /// The windows of `tree`, in the tree's order.
    static func windows(in tree: JSONValue) -> [SessionWindow] {
        var windows: [SessionWindow] = []
        self.collect(tree, into: &windows)
        return windows
    }

    private static func collect(_ node: JSONValue, into windows: inout [SessionWindow]) {
        if let window = self.window(node) { windows.append(window) }
        for child in (node["nodes"]?.arrayValue ?? []) + (node["floating_nodes"]?.arrayValue ?? []) {
            self.collect(child, into: &windows)
        }
    }

    /// A view: a container with a client behind it (a pid), a Wayland app_id or, for an Xwayland window, its
    /// WM_CLASS class.
    private static func window(_ node: JSONValue) -> SessionWindow? {
        guard let type = node["type"]?.stringValue, type == "con" || type == "floating_con",
            let id = node["id"]?.intValue, let pid = node["pid"]?.intValue
        else { return nil }
        let appID = node["app_id"]?.stringValue ?? node["window_properties"]?["class"]?.stringValue
        guard let appID else { return nil }
        let presentation: SessionWindow.Presentation =
            node["focused"]?.boolValue == true ? .focused : node["visible"]?.boolValue == true ? .shown : .hidden
        return SessionWindow(
            id: String(id),
            appID: appID,
            pid: Int32(exactly: pid),
            presentation: presentation,
            title: node["name"]?.stringValue ?? ""
        )
    }
}
