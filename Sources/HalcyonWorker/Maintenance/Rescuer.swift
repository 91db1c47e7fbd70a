import HalcyonQueue
import HalcyonRuntime
import Logging
import ServiceLifecycle

/// Moves jobs whose lease ended (their worker died or stalled) back to the queue, or fails them
/// when they are out of attempts, every few seconds. Any worker rescues any worker's jobs but
/// its own held ones: a stalled process that wakes up renews or releases those itself, and
/// must not rescue them first (spending their attempt) because its rescue ran before its renewal.
struct Rescuer: Service, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    var description: String { "Rescuer" }

    let configuration: WorkerConfiguration
    let queue: JobQueue
    let state: WorkerState
    let metrics: Metrics
    let logger: Logger

    /// How long a job the database refused to rescue is left out of rescues.
    static let refusedPause: Duration = .seconds(600)
    /// How often fair keys without queued jobs are taken out of the rotation.
    static let fairKeysInterval: Duration = .seconds(60)

    func run() async {
        // Jobs the database refused to rescue (a trigger, a constraint), left out until the
        // time given, so one such row neither blocks the others nor floods the log.
        var refused: [Int64: ContinuousClock.Instant] = [:]
        var fairKeysDue = ContinuousClock.now
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            await rescue(refused: &refused)
            if ContinuousClock.now >= fairKeysDue {
                fairKeysDue = ContinuousClock.now + Self.fairKeysInterval
                await forgetIdleFairKeys()
            }
            try? await cancelWhenGracefulShutdown { [interval = configuration.effectiveRescueInterval] in
                try await Task.sleep(for: interval)
            }
        }
    }

    /// Keys of the fair-share rotation without queued jobs go (they would be looked at by every
    /// claim); a key comes back with its next job.
    private func forgetIdleFairKeys() async {
        do {
            let forgotten = try await queue.forgetIdleFairKeys()
            if forgotten > 0 { logger.debug("idle fair keys left the rotation", metadata: ["keys": "\(forgotten)"]) }
        } catch {
            logger.warning("forgetting idle fair keys failed", metadata: ["error": "\(error)"])
        }
    }

    private func rescue(refused: inout [Int64: ContinuousClock.Instant]) async {
        let now = ContinuousClock.now
        refused = refused.filter { $0.value > now }
        let excluded = Array(refused.keys) + state.withHeld { $0.claims.map(\.id) }
        var rescued: [JobQueue.Rescued] = []
        do {
            rescued = try await queue.rescueExpired(excluding: excluded)
        } catch let error as DatabaseError where !error.isTransient {
            // One row the database refuses fails the whole statement: rescue row by row.
            rescued = await rescueOneByOne(excluding: excluded, refused: &refused, after: error)
        } catch {
            logger.warning("rescue failed", metadata: ["error": "\(error)"])
        }
        guard !rescued.isEmpty else { return }
        state.updateSummary { $0.rescued += rescued.count }
        metrics.rescued(rescued.count)
        logger.notice(
            "rescued jobs whose lease ended",
            metadata: [
                "requeued": "\(rescued.filter { !$0.failed }.count)", "failed": "\(rescued.filter(\.failed).count)",
            ])
        state.wake.wake()
    }

    private func rescueOneByOne(
        excluding: [Int64], refused: inout [Int64: ContinuousClock.Instant],
        after error: DatabaseError
    ) async -> [JobQueue.Rescued] {
        logger.warning("the database refused a batch rescue; rescuing one job at a time", metadata: ["error": "\(error)"])
        var rescued: [JobQueue.Rescued] = []
        do {
            for id in try await queue.expiredLeases(excluding: excluding) {
                do {
                    if let job = try await queue.rescue(id: id) { rescued.append(job) }
                } catch let refusal as DatabaseError where !refusal.isTransient {
                    refused[id] = ContinuousClock.now + Self.refusedPause
                    logger.error(
                        "the database refused to rescue this job; leaving it for \(TimeSpan.format(Self.refusedPause))",
                        metadata: ["job": "\(id)", "error": "\(refusal)"])
                }
            }
        } catch {
            logger.warning("rescue failed", metadata: ["error": "\(error)"])
        }
        return rescued
    }
}
