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
    /// Follows `watches`: matches rebuilt from their union, and the reader placed at the earliest position any of
    /// them needs.
    func change(to watches: [ConfiguredWatch], starts: [WatchName: WatchStart]) {
        self.starts = starts
        guard !watches.isEmpty || self.reader != nil, let reader = self.openReader() else {
            self.followed = [:]
            self.order = []
            return
        }
        // The new union of matches first: a new watch's start (the tail, a time) is then an entry the watches read.
        self.applyMatches(reader, watches)
        let stored = (try? self.store.journalPositions()) ?? [:]
        var next: [WatchName: Followed] = [:]
        var tail: JournalCursor?
        for configured in watches {
            let name = configured.name
            if var kept = self.followed[name], kept.configured.watch == configured.watch {
                kept.configured = configured
                // A watch that has caught up has read everything up to where the reader is; one that has not keeps
                // where it starts.
                if kept.caughtUp { kept.skip = JournalCursor.later(kept.skip, self.position) }
                next[name] = kept
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
            var followed = Followed(configured: configured, matcher: matcher, poster: Self.peer(configured.owner))
            if let positions = stored[name.value] {
                // Where it was: its own position, and past it each app's.
                followed.skip = positions[""].flatMap(JournalCursor.init)
                for (app, text) in positions where !app.isEmpty {
                    if let app = try? AppName(app), let cursor = JournalCursor(text) { followed.appSkips[app] = cursor }
                }
                if followed.skip == nil {
                    // Only per-app positions: the earliest of them is where it reads from.
                    followed.skip = followed.appSkips.values.reduce(nil) { earliest, cursor in
                        earliest.map { cursor.isAfter($0) ? $0 : cursor } ?? cursor
                    }
                }
            } else {
                switch starts[name] ?? .tail {
                case .tail:
                    if tail == nil { tail = Self.tail(of: reader) }
                    followed.skip = tail
                case .head:
                    followed.skip = nil  // from the first entry the journal keeps
                case .cursor(let text):
                    followed.skip = JournalCursor(text)
                case .time(let microseconds):
                    followed.skip = Self.entryBefore(microseconds, in: reader)
                }
                if let skip = followed.skip {
                    self.store.setJournalPosition(watch: name.value, cursor: skip.text)
                    followed.written = skip.text
                }
            }
            next[name] = followed
        }
        for name in self.followed.keys where next[name] == nil { self.batcher.forget(name) }
        self.followed = next
        self.order = watches.map(\.name)
        self.shared.withLock { shared in
            shared.figures = shared.figures.filter { next[$0.key] != nil }
            for name in next.keys where shared.figures[name] == nil { shared.figures[name] = WatchFigures() }
        }
        self.seekToEarliest(reader)
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

    /// Places the reader after the earliest position a watch needs (at the head if one reads from there).
    func seekToEarliest(_ reader: JournalReader) {
        self.standsOnUnread = false
        guard !self.followed.isEmpty else { return }
        var earliest: JournalCursor?
        var fromHead = false
        for followed in self.followed.values {
            // A watch without a position has read up to the reader's position, unless it reads from the head.
            guard let skip = followed.skip ?? (followed.caughtUp ? self.position : nil) else {
                fromHead = true
                break
            }
            earliest = earliest.map { skip.isAfter($0) ? $0 : skip } ?? skip
        }
        do {
            guard !fromHead, let earliest else {
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

    /// Reads again from the positions on disk: a post of some watch was not kept.
    func rewind() {
        guard self.reader != nil else { return }
        self.rewindWanted = false
        self.batcher.forget()
        let watches = self.order.compactMap { self.followed[$0]?.configured }
        self.followed = [:]
        self.position = nil
        self.shared.withLock { $0.reader.rewinds += 1 }
        self.logger.warning("A journal watch's post was not kept: reading again from the positions on disk")
        self.change(to: watches, starts: self.starts)
    }

    /// EBADMSG or EADDRNOTAVAIL while reading (a file damaged or changed under the reader): seek again from the
    /// last entry read rather than stop or loop; anything else is logged and tried again on the next wake.
    func readFailed(_ error: SystemdError) {
        guard let reader = self.reader else { return }
        self.logger.warning("Reading the journal failed (\(error)): seeking again", metadata: ["reason": "\(error)"])
        if let position = self.position {
            for name in self.order where self.followed[name]?.caughtUp == true {
                let skip = self.followed[name]?.skip
                self.followed[name]?.skip = JournalCursor.later(skip, position)
            }
        }
        self.seekToEarliest(reader)
        if !JournalReader.needsSeek(error) { self.pause(.seconds(1)) }
    }
}
