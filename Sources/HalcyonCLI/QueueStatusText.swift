import Foundation
import HalcyonQueue
import HalcyonRuntime

/// `halcyon status`'s report, also printed at the end of the demo.
package enum QueueStatusText {
    /// `41%` of a limit; any limit a row can hold (0, negative) prints.
    static func percent(_ used: Int64, of limit: Int64) -> String {
        limit > 0 ? "\(Int(saturating: (Double(used) / Double(limit) * 100).rounded()))%" : "no room"
    }

    package static func render(_ s: QueueStatus) -> String {
        var out = "JOBS\n"
        for c in s.counts { out += "  \(c.state.padding(toLength: 10, withPad: " ", startingAt: 0)) \(c.count)\n" }
        out += "  queued: \(s.runnable) runnable now, \(s.scheduled) scheduled for later"
        if let age = s.oldestRunnableAge { out += "; oldest runnable waited \(TimeSpan.format(age.rounded()))" }
        out += "\nQUEUES\n"
        for q in s.queues {
            let counts = ["queued", "running", "succeeded", "failed", "cancelled"].map { "\($0) \(q.counts[$0] ?? 0)" }.joined(separator: ", ")
            let paused = q.paused ? "PAUSED\(q.pausedFor.map { " \(TimeSpan.format($0.rounded())) ago" } ?? "")  " : ""
            out += "  \(q.name.padding(toLength: 16, withPad: " ", startingAt: 0)) \(paused)\(counts)\n"
            if let limits = q.limits.summary { out += "  \("".padding(toLength: 16, withPad: " ", startingAt: 0)) limits: \(limits)\n" }
        }
        if let t = s.tag {
            out += "TAG \(t.name)\n  " + t.counts.map { "\($0.state) \($0.count)" }.joined(separator: ", ") + "\n"
        }
        out += "THROUGHPUT (finished)\n  last 1m: \(s.finishedLast1m)   last 5m: \(s.finishedLast5m)   last 15m: \(s.finishedLast15m)\n"
        out += "FAILURES (last 24h)\n"
        if s.failures.isEmpty { out += "  none\n" }
        for f in s.failures {
            out +=
                "  \(f.code.padding(toLength: 28, withPad: " ", startingAt: 0)) \(String(f.count).padding(toLength: 6, withPad: " ", startingAt: 0)) \(f.latestMessage.prefix(100))\n"
        }
        out += "STORE\n"
        if let st = s.store {
            out +=
                "  \(ByteSize.format(st.bytes))\(st.sizeLimit.map { " of \(ByteSize.format($0)) limit (\(Self.percent(st.bytes, of: $0)))" } ?? ", no size limit"), \(st.files) files"
            out += " — at the last sweep, \(TimeSpan.format(st.age.rounded())) ago by \(st.sweptBy) (\(st.root))\n"
        } else {
            out += "  not swept yet (workers sweep every --sweep-interval; or run `halcyon sweep`)\n"
        }
        if let p = s.lastPrune {
            out +=
                "RETENTION\n  last run \(TimeSpan.format(p.age.rounded())) ago by \(p.prunedBy): pruned \(p.succeeded) succeeded, \(p.failed) failed, \(p.cancelled) cancelled\n"
        }
        out += "WORKERS\n"
        if s.workers.isEmpty { out += "  none\n" }
        for w in s.workers {
            let age = ((w["heartbeat_age"] ?? nil).flatMap { Double($0) }).map { TimeSpan.format($0.rounded()) } ?? "?"
            out +=
                "  \(((w["id"] ?? nil) ?? "?").padding(toLength: 28, withPad: " ", startingAt: 0)) \(((w["status"] ?? nil) ?? "?").padding(toLength: 8, withPad: " ", startingAt: 0)) heartbeat \(age) ago, done \((w["jobs_done"] ?? nil) ?? "0"), failed \((w["jobs_failed"] ?? nil) ?? "0")\(Self.restarts(w))\n"
        }
        return out
    }

    /// ", restarted 2 times (last: SIGSEGV)" for a worker whose image process died; empty otherwise.
    static func restarts(_ w: [String: String?]) -> String {
        guard let n = (w["restarts"] ?? nil).flatMap({ Int($0) }), n > 0 else { return "" }
        return ", restarted \(n) time\(n == 1 ? "" : "s") (last: \(((w["last_crash"] ?? nil) ?? "?").prefix(120)))"
    }
}
