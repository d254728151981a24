import CoalesceServer
import CoalesceTestSupport
import Foundation
import Testing

/// systemd/coalesced.catalog, compiled by journalctl itself into a catalog database under a scratch root.
@Suite struct CatalogTests {
    @Test func journalctlCompilesTheCatalogWithAnEntryForEveryMessageID() async throws {
        let root = try TemporaryDirectory()
        let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        try root.write(
            "usr/lib/systemd/catalog/coalesced.catalog",
            try String(contentsOfFile: repository + "/systemd/coalesced.catalog", encoding: .utf8)
        )
        let update = try await onThread { try runProcess("/bin/journalctl", ["--root=\(root.path)", "--update-catalog"]) }
        #expect(update.status == 0, "\(update.stderr)")
        for id in MessageID.all {
            let entry = try await onThread {
                try runProcess("/bin/journalctl", ["--root=\(root.path)", "--list-catalog", id])
            }
            #expect(entry.stdout.hasPrefix("\(id) coalesced: "), "no catalog entry for \(id): \(entry.stderr)")
        }
    }
}
