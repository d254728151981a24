import CoalesceStore
import Logging
import ServiceLifecycle

/// The store's writer as one of the daemon's services. It is the first to start and the last to stop: once nothing
/// else runs, the writes still waiting for company (acknowledgements, recorded states) go to disk, so that those
/// events do not come again after the next start, and the store is closed: its log copied into the database and
/// emptied, and the stop recorded.
struct StoreService: Service {
    let store: Store
    let logger: Logger

    func run() async {
        // Cancelled or told to shut down gracefully: either way the store is closed.
        try? await gracefulShutdown()
        do {
            try await self.store.close()
        } catch {
            // Nothing is lost: the log stays, and SQLite reads it at the next start.
            self.logger.warning(
                "Cannot close the store cleanly; its log is read at the next start",
                metadata: ["reason": "\(error)"]
            )
        }
    }
}
