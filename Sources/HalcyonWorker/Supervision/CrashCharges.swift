import Foundation
import HalcyonDomain
import HalcyonRuntime

/// Who pays for an image process's death: the jobs that caused it, as far as the supervisor can
/// tell, and nobody else.
///
/// - Ended for a job stuck in one call past `--max-job-time`: that job fails for good
///   (`image.too_costly`); the other jobs in processing beside it are charged `worker.crashed`
///   as bystanders — retried at once, never counted towards their poison-pill limit.
/// - Any death (a fault in a C library, a trap, an abort, a SIGKILL, `--max-memory`): the jobs in
///   processing — decoding, running their steps, encoding: where a fault strikes and where
///   memory grows by the image — are charged `worker.crashed`.
/// - Over `--max-memory` with no job in processing: the memory was taken by the jobs holding
///   bytes outside processing (downloads, kept originals, watermarks, results being stored), and
///   they are charged instead — without this a source too big to hold would restart the process
///   forever, charged to nobody. (A SIGKILL from outside, whose reason the supervisor cannot
///   see, charges the jobs in processing only: a job being downloaded is released.)
///
/// - Still running past its exit deadline after a stop request: the jobs stuck in one call past
///   their deadline fail for good (`image.too_costly`); the others are released, as a stop does.
///
/// A job charged `worker.crashed` as many times as `poisonAfter` (bystander entries not counted)
/// fails for good. Every other job the process held is released without spending an attempt.
struct CrashCharges: Equatable, Sendable {
    /// The jobs charged, with what they are charged.
    var charged: [(id: Int64, error: HalcyonError)]
    /// The jobs released without charge.
    var released: [Int64]

    /// What the child held, as the supervisor saw it when it died.
    struct Held: Sendable {
        var id: Int64
        /// Earlier deaths charged to it (bystander entries not counted).
        var crashes: Int
    }

    init(
        cause: Supervisor.Cause, held: [Held], inProcessing: Set<Int64>, holdingBytes: Set<Int64>, poisonAfter: Int,
        maxJobTime: Duration
    ) {
        var charged: [(Int64, HalcyonError)] = []
        var released: [Int64] = []
        for job in held {
            if let error = Self.charge(
                job, cause: cause, inProcessing: inProcessing, holdingBytes: holdingBytes, poisonAfter: poisonAfter, maxJobTime: maxJobTime)
            {
                charged.append((job.id, error))
            } else {
                released.append(job.id)
            }
        }
        self.charged = charged
        self.released = released
    }

    private static func charge(
        _ job: Held, cause: Supervisor.Cause, inProcessing: Set<Int64>, holdingBytes: Set<Int64>, poisonAfter: Int, maxJobTime: Duration
    ) -> HalcyonError? {
        switch cause {
        case .stopOverrun(let stuck):
            // A stop, not a crash: only a job stuck in one call past its deadline is charged.
            guard stuck.contains(job.id) else { return nil }
            return HalcyonError(
                .tooCostly,
                "processing was stuck in one call past the \(TimeSpan.format(maxJobTime)) limit (--max-job-time) when the worker was stopped",
                permanent: true)
        case .stuck(let ids):
            if ids.contains(job.id) {
                return HalcyonError(
                    .tooCostly,
                    "processing was stuck in one call past the \(TimeSpan.format(maxJobTime)) limit (--max-job-time); the worker process was ended",
                    permanent: true)
            }
            guard inProcessing.contains(job.id) else { return nil }
            let others = ids.map(String.init).joined(separator: ", ")
            var error = HalcyonError(
                .workerCrashed,
                "the worker's image process was ended for job \(others), stuck past --max-job-time, while this job was in processing beside it; retried",
                permanent: false)
            error.bystander = true
            return error
        case .memory:
            if inProcessing.contains(job.id) { return crashed(job, cause: cause, poisonAfter: poisonAfter, while: "in processing") }
            if inProcessing.isEmpty, holdingBytes.contains(job.id) {
                return crashed(job, cause: cause, poisonAfter: poisonAfter, while: "holding its source's bytes")
            }
            return nil
        case .signal:
            guard inProcessing.contains(job.id) else { return nil }
            return crashed(job, cause: cause, poisonAfter: poisonAfter, while: "in processing")
        }
    }

    private static func crashed(_ job: Held, cause: Supervisor.Cause, poisonAfter: Int, while stage: String) -> HalcyonError {
        let poison = job.crashes + 1 >= poisonAfter
        return HalcyonError(
            .workerCrashed,
            "the worker's image process died (\(cause.description)) while this job was \(stage)"
                + (poison ? "; failed for good: a process died \(job.crashes + 1) times while it held this job" : ""),
            permanent: poison)
    }

    static func == (a: CrashCharges, b: CrashCharges) -> Bool {
        a.released == b.released && a.charged.map(\.id) == b.charged.map(\.id)
            && a.charged.map(\.error.description) == b.charged.map(\.error.description)
    }

    /// The ids of the jobs that fail for good.
    var poisoned: [Int64] { charged.filter { $0.error.code == .workerCrashed && $0.error.permanent }.map(\.id) }
}
