import HalcyonQueue
import Logging

extension Job {
    /// What every log line about this claim of the job names: `job`, `attempt`, and `trace_id`
    /// when it was enqueued with a traceparent (the enqueuer's trace, so that a log search by a
    /// request's trace id finds the jobs it enqueued).
    var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["job": "\(id)", "attempt": "\(attempt)"]
        if let traceID { metadata["trace_id"] = "\(traceID)" }
        return metadata
    }
}

extension JobPlan {
    /// Its job's log metadata (`Job.logMetadata`); for an attempt whose spans are exported, the
    /// trace they are in (`trace_id`) and its `process` span (`span_id`), so that a log search
    /// and the trace viewer meet.
    var logMetadata: Logger.Metadata {
        var metadata = job.logMetadata
        if let trace {
            metadata["trace_id"] = "\(trace.traceID)"
            metadata["span_id"] = "\(trace.spanID)"
        }
        return metadata
    }
}
