import Foundation
import HalcyonRuntime
import Logging

/// How Halcyon waits for a database that is down, restarting or failing over: the one place
/// that decides it, for the worker's connections, claims and outcomes, the LISTEN connection
/// and the CLI's start-up check. Delays start at 100 ms and double up to `maximum`, without
/// jitter (a single worker's retries are not a thundering herd; a fleet's claims are spread by
/// their own timing).
public struct DatabaseRetry: Sendable {
    /// The longest wait between two attempts.
    public var maximum: Duration

    public init(maximum: Duration = .seconds(10)) {
        self.maximum = maximum
    }

    /// The wait after `failures` consecutive failures (1-based): 100 ms × 2^(failures−1), capped.
    public func delay(afterFailures failures: Int) -> Duration {
        Backoff(base: .milliseconds(100), maximum: maximum).delay(afterAttempt: failures)
    }

    /// Whether waiting and trying again may help: a lost connection, a cancelled statement, a
    /// serialization failure (`DatabaseError.isTransient`).
    @Sendable public static func isTransient(_ error: any Error) -> Bool {
        (error as? DatabaseError)?.isTransient ?? false
    }

    /// Runs `body` until it succeeds. An error `retryIf` rejects is thrown at once; otherwise the
    /// failure is logged (`"<what> failed; retrying"`) and `body` runs again after `wait` — unless
    /// `giveUpWhen` says to stop, when the last error is thrown.
    /// - Parameter wait: how to wait out a delay; the claim loop waits on its wake-up signal so a
    ///   stop request cuts the wait short.
    public func run<T>(
        _ what: String, logger: Logger,
        giveUpWhen giveUp: () -> Bool = { false },
        retryIf isRetryable: (any Error) -> Bool = DatabaseRetry.isTransient,
        wait: (Duration) async -> Void = { try? await Task.sleep(for: $0) },
        _ body: () async throws -> T
    ) async throws -> T {
        var failures = 0
        while true {
            do {
                return try await body()
            } catch {
                guard !giveUp(), isRetryable(error) else { throw error }
                failures += 1
                let delay = delay(afterFailures: failures)
                logger.warning("\(what) failed; retrying", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(delay))"])
                await wait(delay)
            }
        }
    }
}
