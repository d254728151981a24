import GRDB

/// The store's schema, one migration per version of it: a store of any earlier version is brought up to date when
/// it opens, in one transaction each.
extension Store {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("1: apps and saved state") { db in
            try db.create(table: "app") { table in
                table.column("name", .text).primaryKey()
                table.column("owner", .integer).notNull()
                table.column("backgroundModes", .text).notNull()  // sorted, newline-separated
                table.column("exitsOnSuspend", .boolean).notNull()
                table.column("launchUnit", .text)
            }
            try db.create(table: "savedState") { table in
                table.column("app", .text).primaryKey().references("app", onDelete: .cascade)
                table.column("data", .text).notNull()
            }
        }
        migrator.registerMigration("2: events") { db in
            // What an app declared about its events (policies per kind, who may post), as JSON the daemon reads.
            try db.alter(table: "app") { table in table.add(column: "declarations", .text).notNull().defaults(to: "{}") }
            // Each start of the daemon is a generation; sequence numbers start past the previous one's.
            try db.create(table: "meta") { table in
                table.column("key", .text).primaryKey()
                table.column("value", .integer).notNull()
            }
            // What a suspended or stopped app holds: one row per kind (upserted as posts fold in), in order of
            // each kind's first post.
            try db.create(table: "held") { table in
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("kind", .text).notNull()
                table.column("position", .integer).notNull()
                table.column("slot", .text).notNull()
                table.primaryKey(["app", "kind"])
            }
            // Events sent to an app and not yet acknowledged: sent again when it attaches again.
            try db.create(table: "delivery") { table in
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("seq", .integer).notNull()
                table.column("event", .text).notNull()
                table.primaryKey(["app", "seq"])
            }
        }
        migrator.registerMigration("3: delivery ids and netChange baselines") { db in
            // Deliveries are numbered by the store in the order they were written, not by the stream's sequence
            // numbers: an event is written before it is sent, and numbered on the stream when it goes out.
            try db.create(table: "deliveryByID") { table in
                table.column("id", .integer).primaryKey()
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("event", .text).notNull()
            }
            try db.execute(sql: "INSERT INTO deliveryByID (app, event) SELECT app, event FROM delivery ORDER BY app, seq")
            try db.drop(table: "delivery")
            try db.rename(table: "deliveryByID", to: "delivery")
            // What each app last received of each netChange kind: what a wake compares the held value against.
            try db.create(table: "baseline") { table in
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("kind", .text).notNull()
                table.column("payload", .text).notNull()
                table.primaryKey(["app", "kind"])
            }
        }
        migrator.registerMigration("4: app states") { db in
            // The state each app was last in, with the process that ran it, so that a restarted daemon takes up
            // where it was for an app whose process outlived it.
            try db.alter(table: "app") { table in
                table.add(column: "state", .text).notNull().defaults(to: "notRunning")
                table.add(column: "interrupted", .boolean).notNull().defaults(to: false)
                table.add(column: "pid", .integer)
                table.add(column: "process", .text)
            }
        }
        migrator.registerMigration("5: queue entries as rows") { db in
            // A queue kind's entries, one row per post: a post appends a row, and the oldest are dropped by their
            // serial, rather than the kind's whole list being written again with each post.
            try db.create(table: "queued") { table in
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("kind", .text).notNull()
                table.column("serial", .integer).notNull()
                table.column("posted", .double).notNull()
                table.column("payload", .text).notNull()
                table.primaryKey(["app", "kind", "serial"])
            }
            // A held queue kind kept its entries in a list in its slot, the last of them its last post: the entry at
            // `key` of a list of n is post count - n + 1 + key.
            try db.execute(
                sql: """
                    INSERT INTO queued (app, kind, serial, posted, payload)
                    SELECT held.app, held.kind,
                        json_extract(held.slot, '$.count') - json_array_length(held.slot, '$.list') + 1 + entry.key,
                        json_extract(entry.value, '$.posted'), entry.value -> '$.payload'
                    FROM held, json_each(held.slot, '$.list') AS entry
                    """
            )
            try db.execute(sql: "UPDATE held SET slot = json_remove(slot, '$.list') WHERE json_type(slot, '$.list') IS NOT NULL")
        }
        migrator.registerMigration("6: notifications") { db in
            try Self.createNotificationTables(db)
        }
        migrator.registerMigration("7: suspension mode") { db in
            // How the app asked to be kept from running code while suspended; NULL (every app of an older store):
            // as the daemon's configuration says.
            try db.alter(table: "app") { table in table.add(column: "suspension", .text) }
        }
        migrator.registerMigration("8: journal watches") { db in
            // The watches an administrator added at run time (those of the configuration live there), each as the
            // JSON the System interface takes.
            try db.create(table: "journal_watch") { table in
                table.column("name", .text).primaryKey()
                table.column("definition", .text).notNull()
                table.column("owner", .integer).notNull()
            }
            // How far each watch has read: per app it posts to, written in the same write as the posts of the
            // entries up to it; under app '', the point before which every entry it matched is posted.
            try db.create(table: "journal_position") { table in
                table.column("watch", .text).notNull()
                table.column("app", .text).notNull()
                table.column("cursor", .text).notNull()
                table.primaryKey(["watch", "app"])
            }
        }
        migrator.registerMigration("9: rows set aside") { db in
            // What the daemon could not read back of an app at start, moved here whole (every row of the app's held
            // data) so that the store opens and the rest of it is served. Kept until an operator removes it; not
            // tied to the app's row, so that a purge does not take it.
            try db.create(table: "setAside") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("app", .text).notNull()
                table.column("at", .double).notNull()
                table.column("reason", .text).notNull()
                table.column("source", .text).notNull()  // the table the row was in
                table.column("row", .text).notNull()  // the row, as a JSON object of its columns
            }
        }
        migrator.registerMigration("10: delivered entries shown") { db in
            // Whether the desktop of the app's user owes a delivered entry nothing more: an agent of that user was
            // sent it, it went to the app alone, or it was answered. An agent that connects is sent the entries of
            // its user's apps that are not. Entries of an older store count as shown: an upgrade does not show them
            // all again.
            try db.alter(table: "alertDelivered") { table in table.add(column: "shown", .boolean).notNull().defaults(to: false) }
            try db.execute(sql: "UPDATE alertDelivered SET shown = 1")
        }
        migrator.registerMigration("11: scene states") { db in
            // What an app saved for each of its scenes (SaveSceneState), handed back when the same scene connects
            // again; the newest saves last in rowid order, which is the order a start takes them up in.
            try db.create(table: "sceneState") { table in
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("scene", .text).notNull()
                table.column("data", .text).notNull()
                table.primaryKey(["app", "scene"])
            }
        }
        migrator.registerMigration("12: window app ids") { db in
            // The app ids the app's windows carry besides its name (a desktop file's id, Wayland's app_id, X11's
            // WM_CLASS), sorted and newline-separated; empty for every app of an older store: its name alone.
            try db.alter(table: "app") { table in table.add(column: "windowIds", .text).notNull().defaults(to: "") }
        }
        migrator.registerMigration("13: what apps open") { db in
            // The URL schemes and MIME types an app opens (App.Open), sorted and newline-separated; empty for every
            // app of an older store: it opens nothing until it registers again.
            try db.alter(table: "app") { table in
                table.add(column: "urlSchemes", .text).notNull().defaults(to: "")
                table.add(column: "mimeTypes", .text).notNull().defaults(to: "")
            }
        }
        migrator.registerMigration("14: refreshes") { db in
            // Each app's scheduled background refreshes (ScheduleRefresh): the request, and how it stands (when its
            // window next opens, its failures in a row, its last run), kept across restarts as notification requests
            // are. Times in seconds since the epoch; requires is the conditions' names, sorted, newline-separated.
            try db.create(table: "refresh") { table in
                table.column("app", .text).notNull().references("app", onDelete: .cascade)
                table.column("id", .text).notNull()
                table.column("earliest", .double).notNull()
                table.column("intervalSec", .double)
                table.column("flexSec", .double).notNull()
                table.column("requires", .text).notNull()
                table.column("budgetSec", .double).notNull()
                table.column("late", .text).notNull()
                table.column("due", .double).notNull()
                table.column("failures", .integer).notNull()
                table.column("lastRun", .double)
                table.column("lastOutcome", .text)
                table.primaryKey(["app", "id"])
            }
        }
        return migrator
    }
}
