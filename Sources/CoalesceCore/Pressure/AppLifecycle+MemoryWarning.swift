extension AppLifecycle {
    /// Memory is short: an app that runs code (inactive, active, in the background) is told didReceiveMemoryWarning,
    /// numbered on its stream like any callback; a suspended app runs no code and hears nothing (it may be purged).
    /// No deadline: the app frees what it can and acknowledges it as it does any callback.
    public mutating func memoryWarning() -> [LifecycleEffect] {
        guard self.receivesAtOnce else { return [] }
        return [.deliver(.didReceiveMemoryWarning, sequence: self.reserveSequence())]
    }
}
