import Foundation

/// Webhook deliveries, kept on the job's row (`callback_status`, `callback_attempts`,
/// `callback_error`, `callback_at`) so that a delivery that was due survives any worker.
extension JobQueue {
    /// A delivery taken for one attempt.
    public struct Callback: Sendable, Equatable {
        public var jobID: Int64
        /// This delivery's attempt, counting from 1.
        public var attempt: Int
        public var url: String
        /// The JSON body to POST.
        public var body: String
        /// The same for every attempt of this delivery, new when the job finishes again
        /// (`job_<id>_<finished_at in UTC, to the microsecond>`): Standard Webhooks' `webhook-id`.
        public var messageID: String
        /// The job's trace context as its row holds it (the table checks it; a sender checks it
        /// again, `traceHeaders`, before it becomes a header).
        public var traceparent: String? = nil
        public var tracestate: String? = nil
        /// The trace the job's spans were exported in (`trace_id`); a worker with tracing on puts
        /// the delivery's `webhook` span there.
        public var recordedTraceID: String? = nil

        /// The trace id of its traceparent, when that has the W3C format (for log lines).
        public var traceID: String? { traceparent.flatMap(TraceContext.validTraceID(of:)) }

        /// The `traceparent` and `tracestate` headers of a delivery: the job's trace context, so
        /// that the receiver's trace joins the request that enqueued the job. Only values the
        /// W3C format allows become headers (a row edited past the table's checks cannot put a
        /// line break into a request).
        public var traceHeaders: [String: String] {
            guard let traceparent, TraceContext.isValid(traceparent: traceparent) else { return [:] }
            var headers = ["traceparent": traceparent]
            // An empty list (the format allows one) is not sent, as the specification asks of senders.
            if let tracestate, TraceContext.isValid(tracestate: tracestate), !TraceContext.members(of: tracestate).isEmpty {
                headers["tracestate"] = tracestate
            }
            return headers
        }
    }

    /// The largest webhook body: every field it carries is bounded (a cache key of 8 KiB, a
    /// chain of 64 KiB, 32 tags of 128 bytes, an error's message and source of 4 KiB each; the
    /// error's per-source list is left out), so a body is far under this even with JSON's
    /// escapes. A body over it (a row edited by hand) is not sent: its delivery fails.
    public static let maxCallbackBodyBytes = 256 << 10

    /// How a delivery attempt ended.
    public enum CallbackOutcome: Sendable, Equatable {
        case delivered
        /// Try again after this long.
        case retry(after: Duration, error: String)
        /// Given up for good.
        case failed(error: String)
    }

    /// Takes up to `limit` due deliveries, each for `hold` (past it, another worker may take it
    /// again), counting the attempt.
    public func takeCallbacks(limit: Int, hold: Duration) async throws -> [Callback] {
        try await connection.rows(SQL.TakeCallbacks(limit: limit, hold: hold)).map(\.callback)
    }

    /// Puts back a delivery just taken without spending its attempt, due again after `dueIn`;
    /// false when the row moved on meanwhile.
    @discardableResult
    public func putBack(_ callback: Callback, dueIn: Duration) async throws -> Bool {
        try await connection.row(SQL.PutBackCallback(callback: callback, dueIn: dueIn)) != nil
    }

    /// Whether any job's delivery is pending and due within `window` (now, or a retry soon).
    public func callbackDue(within window: Duration) async throws -> Bool {
        try await connection.row(SQL.CallbackDueSoon(window: window))?.due ?? false
    }

    /// Records a delivery attempt's outcome; false when the row moved on meanwhile (retried,
    /// deleted, or taken again after its hold ran out).
    @discardableResult
    public func record(_ callback: Callback, _ outcome: CallbackOutcome) async throws -> Bool {
        try await connection.row(SQL.RecordCallback(callback: callback, outcome: outcome)) != nil
    }
}
