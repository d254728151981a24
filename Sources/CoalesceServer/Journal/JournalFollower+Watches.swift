import CoalesceCore
import CoalesceStore
import Foundation
import Logging
import Synchronization
import Systemd
import Varlink

// Watches and seeking: what the reader follows, and where it reads from after a change, a refused write or a
// read error.
extension JournalFollower {
    /// Follows `watches`: matches rebuilt from their union, and the reader placed where ``WatchPositions`` says
    /// (the earliest position any of them needs).
    func change(to watches: [ConfiguredWatch], starts: [WatchName: WatchStart]) {
        guard !watches.isEmpty || self.reader != nil, let reader = self.openReader() else {
            self.followed = [:]
            _ = self.positions.change(to: [], stored: [:], starts: starts, tail: { nil }, entryBefore: { _ in nil })
            return
        }
        // The new union of matches first: a new watch's start (the tail, a time) is then an entry the watches read.
        self.applyMatches(reader, watches)
        let stored = (try? self.store.journalPositions()) ?? [:]
        var next: [WatchName: Followed] = [:]
        var definitions: [JournalWatch] = []
        var positions: [WatchName: Positions.Stored] = [:]
        for configured in watches {
            let name = configured.name
            if var kept = self.followed[name], kept.configured.watch == configured.watch {
                kept.configured = configured
                next[name] = kept
                definitions.append(configured.watch)
                continue
            }
            var matcher: MessageMatcher?
            if let pattern = configured.watch.pattern {
                // Compiled when the watch was read; one that fails here all the same is left out, not made to take
                // every entry.
                do {
                    matcher = try MessageMatcher(pattern)
                } catch {
                    self.logger.error("Journal watch \(name) left out: \(error.text)", metadata: ["watch": "\(name)"])
                    continue
                }
            }
            next[name] = Followed(configured: configured, matcher: matcher, poster: Self.peer(configured.owner))
            definitions.append(configured.watch)
            if let rows = stored[name.value] { positions[name] = Self.stored(rows) }
        }
        self.followed = next
        self.shared.withLock { shared in
            shared.figures = shared.figures.filter { next[$0.key] != nil }
            for name in next.keys where shared.figures[name] == nil { shared.figures[name] = WatchFigures() }
        }
        self.standsOnUnread = false
        let actions = self.positions.change(
            to: definitions,
            stored: positions,
            starts: starts,
            tail: { Self.tail(of: reader) },
            entryBefore: { Self.entryBefore($0, in: reader) }
        )
        self.carryOut(actions)
    }

    /// A watch's stored positions, as the store keeps them: by app, '' for the watch's own. An app or a cursor
    /// that cannot be read is left out.
    static func stored(_ rows: [String: String]) -> Positions.Stored {
        var positions = Positions.Stored(own: rows[""].flatMap(JournalCursor.init))
        for (app, text) in rows where !app.isEmpty {
            if let app = try? AppName(app), let cursor = JournalCursor(text) { positions.apps[app] = cursor }
        }
        return positions
    }

    /// The union of the watches' matches: any watch with none reads every entry.
    func applyMatches(_ reader: JournalReader, _ watches: [ConfiguredWatch]) {
        reader.flushMatches()
        guard !watches.contains(where: { $0.watch.selection.isEverything }) else { return }
        do {
            for configured in watches {
                for group in configured.watch.selection.matchGroups {
                    for term in group { try reader.addMatch(term) }
                    try reader.addDisjunction()
                }
            }
        } catch {
            self.logger.warning("Cannot narrow the journal reader to the watches' matches (\(error)): it reads every entry")
            reader.flushMatches()
        }
    }

    /// Places the reader after `earliest`, the entry every watch has read (at the head when `nil`).
    func seek(after earliest: JournalCursor?, in reader: JournalReader) {
        do {
            guard let earliest else {
                try reader.seekHead()
                return
            }
            try reader.seek(cursor: earliest.text)
            if try reader.next() {
                // On the entry itself (read before: the next pass goes past it), or past where it was.
                guard try !reader.isAt(cursor: earliest.text) else { return }
                self.standsOnUnread = true
            } else {
                // sd-journal found nothing to stand on from there: the entry's file is gone. The closest entry
                // after it by time is where reading goes on; entries read before are skipped by position.
                try reader.seek(realtimeMicroseconds: earliest.realtime)
            }
            self.logger.notice(
                "The journal entry a watch read last is gone (vacuumed, rotated away, or no longer matched): reading on from the closest entry after it",
                metadata: ["cursor": "\(earliest.text)", "message_id": "\(MessageID.journalPositionLost)"]
            )
        } catch {
            self.logger.warning("Cannot seek in the journal (\(error)): reading from its head", metadata: ["reason": "\(error)"])
            try? reader.seekHead()
        }
    }

    /// Reads again from the positions on disk: a post of some watch was not kept, and `watches` (in order) are
    /// given again as they are.
    func rewind(_ watches: [WatchName]) {
        let configured = watches.compactMap { self.followed[$0]?.configured }
        self.followed = [:]
        self.shared.withLock { $0.reader.rewinds += 1 }
        self.logger.warning("A journal watch's post was not kept: reading again from the positions on disk")
        self.change(to: configured, starts: self.positions.starts)
    }

    /// EBADMSG or EADDRNOTAVAIL while reading (a file damaged or changed under the reader): seek again from the
    /// last entry read rather than stop or loop; anything else is logged and tried again on the next wake.
    func readFailed(_ error: SystemdError) {
        guard self.reader != nil else { return }
        self.logger.warning("Reading the journal failed (\(error)): seeking again", metadata: ["reason": "\(error)"])
        self.standsOnUnread = false
        self.carryOut(self.positions.readFailed())
        if !JournalReader.needsSeek(error) { self.pause(.seconds(1)) }
    }
}
