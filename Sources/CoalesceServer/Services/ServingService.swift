import ServiceLifecycle
import Varlink

/// The Varlink server as one of the daemon's services: its streaming calls run as children of this service, and
/// when the daemon stops it stops accepting, closes every connection, waits for the calls to end and removes the
/// socket file. The socket is bound before the services start, so that it is served by the time READY=1 is sent.
struct ServingService: Service {
    let server: VarlinkServer

    func run() async {
        await withGracefulShutdownHandler {
            await self.server.run()
        } onGracefulShutdown: {
            self.server.stop()
        }
        await self.server.shutdown()
    }
}
