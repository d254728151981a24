import CoalesceStore
import ServiceLifecycle

/// The store's writer as one of the daemon's services. It is the first to start and the last to stop: once nothing
/// else runs, the writes still waiting for company (acknowledgements, recorded states) go to disk, so that those
/// events do not come again after the next start.
struct StoreService: Service {
    let store: Store

    func run() async {
        // Cancelled or told to shut down gracefully: either way the store is flushed.
        try? await gracefulShutdown()
        await self.store.flush()
    }
}
