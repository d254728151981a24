public import CoalesceCore
import GRDB

extension Store {
    /// Every app's scheduled refreshes, as they stood when last written. A row this version cannot read (a condition
    /// or a late policy it does not know, a time that is no number) is left out rather than failing the start.
    public func refreshes() throws(StoreError) -> [(app: String, task: RefreshTask)] {
        try self.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM refresh ORDER BY app, id").compactMap { row -> (app: String, task: RefreshTask)? in
                let requiresText: String = row["requires"]
                let requires = requiresText.split(separator: "\n").map { RefreshCondition(rawValue: String($0)) }
                let earliest: Double = row["earliest"]
                let due: Double = row["due"]
                guard !requires.contains(nil), let late = RefreshLatePolicy(rawValue: row["late"]), earliest.isFinite, due.isFinite
                else { return nil }
                let interval: Double? = row["intervalSec"]
                let request = RefreshRequest(
                    id: row["id"],
                    earliest: earliest,
                    interval: interval.map { RefreshTask.duration(seconds: $0) },
                    flex: RefreshTask.duration(seconds: row["flexSec"]),
                    requires: Set(requires.compactMap { $0 }),
                    budget: RefreshTask.duration(seconds: row["budgetSec"]),
                    late: late
                )
                let outcome: String? = row["lastOutcome"]
                let task = RefreshTask(
                    request: request, due: due, failures: row["failures"], lastRun: row["lastRun"],
                    lastOutcome: outcome.flatMap(RefreshOutcome.init(rawValue:))
                )
                return (app: row["app"], task: task)
            }
        }
    }

    /// Writes one app's refreshes as they stand: `changed` inserted or updated, `removed` deleted, in one
    /// transaction, after every write submitted before it; on disk once the commit says so.
    public func writeRefreshes(of app: AppName, changed: [RefreshTask], removed: [String]) -> StoreCommit {
        self.write { transaction in
            for id in removed { try transaction.run("DELETE FROM refresh WHERE app = ? AND id = ?", [app.value, id]) }
            for task in changed {
                let request = task.request
                try transaction.run(
                    """
                    INSERT INTO refresh (app, id, earliest, intervalSec, flexSec, requires, budgetSec, late, due, failures,
                        lastRun, lastOutcome)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(app, id) DO UPDATE SET earliest = excluded.earliest, intervalSec = excluded.intervalSec,
                        flexSec = excluded.flexSec, requires = excluded.requires, budgetSec = excluded.budgetSec,
                        late = excluded.late, due = excluded.due, failures = excluded.failures, lastRun = excluded.lastRun,
                        lastOutcome = excluded.lastOutcome
                    """,
                    [
                        app.value, request.id, request.earliest, request.interval.map(RefreshTask.seconds), RefreshTask.seconds(request.flex),
                        request.requires.sorted().map(\.rawValue).joined(separator: "\n"), RefreshTask.seconds(request.budget),
                        request.late.rawValue, task.due, task.failures, task.lastRun, task.lastOutcome?.rawValue,
                    ]
                )
            }
        }
    }
}
