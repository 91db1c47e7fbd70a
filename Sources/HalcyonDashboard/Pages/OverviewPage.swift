import Foundation
import HalcyonQueue

/// `/` (template `overview`): counts by state and queue, the last hour's throughput, failures by
/// code, workers, the store against its limit, paused queues.
struct OverviewPage {
    struct Card {
        let state: String
        let count: String
    }
    struct QueueLink {
        let name: String
        let query: String
    }
    struct QueueRow {
        struct Cell {
            let state: String
            let count: String
            let zero: Bool
        }
        let name: String
        let query: String
        let paused: Bool
        let pausedFor: String?
        /// Its fleet-wide limits in words, nil when it has none.
        let limits: String?
        let cells: [Cell]
    }
    struct Failure {
        let code: String
        let codeQuery: String
        let jobs: String
        let latestMessage: Clipped
        let latestJob: String?
        let lastSeen: String
    }
    struct WorkerRow {
        let id: String
        let host: String
        let pid: String
        let status: String
        let heartbeat: String
        let slots: String
        let done: String
        let failedJobs: String
        let restarts: String
        let lastCrash: String?
    }
    struct Store {
        let size: String
        let files: String
        let usage: Charts.Usage?
        let root: String
        let sweptBy: String
        let age: String
    }

    let asOf: String
    let cap: String
    let cards: [Card]
    let finished: String
    let chartReads: String?
    let throughput: Charts.Throughput
    let hasPaused: Bool
    let pausedQueues: [QueueLink]
    let queues: [QueueRow]
    let hasFailures: Bool
    let failures: [Failure]
    let failuresCapped: Bool
    let hasWorkers: Bool
    let workers: [WorkerRow]
    let store: Store?

    init(_ o: QueueOverview, now: Date) {
        asOf = Format.utc(now)
        cap = Format.grouped(o.cap)
        cards = JobState.allCases.map { Card(state: $0.rawValue, count: Format.count(o.counts[$0] ?? QueueOverview.Count(0))) }
        let done = o.throughput.reduce(0) { $0 + $1.succeeded + $1.failed + $1.cancelled }
        finished = Format.grouped(done) + (o.throughputCapped ? "+" : "")
        chartReads = o.throughputCapped ? Format.grouped(2 * o.cap) : nil
        throughput = Charts.throughput(o.throughput, now: now)
        pausedQueues = o.queues.filter(\.paused).map { QueueLink(name: $0.name, query: Format.percent($0.name)) }
        hasPaused = !pausedQueues.isEmpty
        queues = o.queues.map { q in
            QueueRow(
                name: q.name, query: Format.percent(q.name), paused: q.paused, pausedFor: q.paused ? q.pausedFor.map(Format.age) : nil,
                limits: q.limits.summary,
                cells: [JobState.queued, .running, .failed, .cancelled].map { s in
                    let c = q.counts[s] ?? QueueOverview.Count(0)
                    return QueueRow.Cell(state: s.rawValue, count: Format.count(c), zero: c.value == 0)
                })
        }
        failures = o.failures.map { f in
            Failure(
                code: f.code, codeQuery: Format.percent(f.code), jobs: Format.grouped(f.count), latestMessage: Clipped(f.latestMessage, 120),
                latestJob: f.latestJob.map { String($0) }, lastSeen: Format.time(f.lastSeen))
        }
        hasFailures = !failures.isEmpty
        failuresCapped = o.failuresCapped
        workers = o.workers.map { w in
            WorkerRow(
                id: w.id, host: w.host, pid: String(w.pid), status: w.status.rawValue, heartbeat: Format.age(w.heartbeatAge),
                slots: String(w.concurrency), done: Format.grouped(w.done), failedJobs: Format.grouped(w.failed),
                restarts: Format.grouped(w.restarts),
                lastCrash: w.lastCrash)
        }
        hasWorkers = !workers.isEmpty
        store = o.store.map { s in
            Store(
                size: Format.bytes(s.bytes), files: Format.grouped(s.files), usage: s.sizeLimit.map { Charts.usage(s.bytes, of: $0) }, root: s.root,
                sweptBy: s.sweptBy, age: Format.age(s.age))
        }
    }

    func render() -> String { Views.render("overview", self) }
}
