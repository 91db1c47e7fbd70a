import Foundation
import HalcyonRuntime
import Logging

/// Waits for jobs to finish without polling: LISTENs on `halcyon_job_finished`, then reads the
/// jobs' states once, and again only when a notification names one of them (or the listening
/// connection was re-established, or every `recheck` as a safety net). With `pollInterval`,
/// it polls instead (for poolers in transaction mode). Its description masks the connection
/// string's passwords.
public struct JobWaiter: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let conninfo: String
    public let logger: Logger
    /// A state check even without notifications (none are lost while the listener is up;
    /// this bounds the wait should one be).
    public var recheck: Duration = .seconds(30)
    /// Set: never LISTEN, read the states this often instead — behind a pooler in transaction
    /// mode (PgBouncer), where a LISTEN lands on whichever server connection ran it and its
    /// notifications reach nobody.
    public var pollInterval: Duration?

    public init(conninfo: String, logger: Logger) {
        self.conninfo = conninfo
        self.logger = logger
    }

    public var description: String { "JobWaiter(\(Redaction.conninfo(conninfo)))" }
    public var debugDescription: String { description }

    /// What a wait found.
    public struct Outcome: Sendable {
        /// The finished jobs' states.
        public var finished: [Int64: JobQueue.JobStatus]
        /// Ids not finished when the time ran out.
        public var unfinished: [Int64]
        /// Ids with no row.
        public var missing: [Int64]

        public var timedOut: Bool { !unfinished.isEmpty }
        public var allSucceeded: Bool { unfinished.isEmpty && missing.isEmpty && finished.values.allSatisfy { $0.state == .succeeded } }
    }

    /// Waits until every job in `ids` is finished (or has no row), or `timeout` has passed.
    public func wait(for ids: [Int64], timeout: Duration) async throws -> Outcome {
        let wanted = Set(ids)
        let signal = WakeSignal()
        let listener =
            pollInterval != nil
            ? nil
            : JobListener(conninfo: conninfo, channel: JobListener.finishedChannel, logger: logger) { payloads in
                // Empty: (re)connected, so check; otherwise only a notification about one of ours.
                if payloads.isEmpty || payloads.contains(where: { Self.jobID(inPayload: $0).map(wanted.contains) ?? true }) {
                    signal.wake()
                }
            }
        listener?.start()
        defer { listener?.stop() }
        let connection = try await PGConnection.connect(conninfo, label: "wait")
        defer { Task { await connection.close() } }
        let queue = JobQueue(connection: connection)
        let deadline = ContinuousClock.now + timeout
        var outcome = Outcome(finished: [:], unfinished: ids, missing: [])
        // The first wake-up comes once the listener listens: nothing can finish unseen after it.
        if listener != nil { await signal.wait(timeout: deadline - .now) }
        while true {
            let remaining = outcome.unfinished
            let states = try await queue.states(of: remaining)
            outcome.unfinished = []
            for id in remaining {
                if let s = states[id] {
                    if s.state.isFinished { outcome.finished[id] = s } else { outcome.unfinished.append(id) }
                } else {
                    outcome.missing.append(id)
                }
            }
            if outcome.unfinished.isEmpty || ContinuousClock.now >= deadline { return outcome }
            await signal.wait(timeout: min(deadline - .now, pollInterval ?? recheck))
        }
    }

    /// The `id` of a `halcyon_job_finished` payload.
    public static func jobID(inPayload payload: String) -> Int64? {
        guard case .object(let o)? = JSONValue.parse(payload), let n = o["id"]?.numberValue else { return nil }
        return Int64(exactly: n)
    }
}
