import Foundation
import HalcyonRuntime

/// A duty one process of the fleet does at a time.
public enum LeaseName: String, Sendable {
    case storeSweep = "store_sweep"
    case rowRetention = "row_retention"
    case usageRollUp = "usage_roll_up"
}

/// Leases (`halcyon.leases`): who does a fleet-wide duty now. A row with an expiry, not a session
/// advisory lock, so it holds behind a pooler in transaction mode and lapses by itself when its
/// holder dies.
extension JobQueue {
    /// How long a lease lasts unless renewed; `withLease` renews it every third of that.
    public static let leaseDuration: Duration = .seconds(60)

    /// A holder name for `who` that no other process shares (`who` may be a worker id given
    /// twice by mistake, or `halcyon sweep` run from two shells).
    public static func leaseHolder(_ who: String) -> String {
        "\(who) (\(ProcessInfo.processInfo.hostName) pid \(getpid()) \(processNonce))"
    }

    private static let processNonce = String(UInt32.random(in: 0...UInt32.max), radix: 36)

    /// Takes `name` for `holder` when it is free (or lapsed, or `holder`'s already); false when
    /// someone else holds it.
    public func acquireLease(_ name: LeaseName, holder: String, for duration: Duration = JobQueue.leaseDuration) async throws -> Bool {
        try await connection.row(SQL.AcquireLease(lease: SQL.DutyLease(name: name, holder: holder, duration: duration))) != nil
    }

    /// Extends `holder`'s lease; false when it no longer holds it.
    public func renewLease(_ name: LeaseName, holder: String, for duration: Duration = JobQueue.leaseDuration) async throws -> Bool {
        try await connection.row(SQL.RenewLease(lease: SQL.DutyLease(name: name, holder: holder, duration: duration))) != nil
    }

    /// Gives `holder`'s lease up (nothing when it no longer holds it).
    public func releaseLease(_ name: LeaseName, holder: String) async throws {
        try await connection.run(SQL.ReleaseLease(name: name, holder: holder))
    }

    /// Runs `body` holding lease `name`, or returns nil at once when another holder has it.
    /// While `body` runs the lease is renewed every third of `duration`; a renewal that finds it
    /// lost (or cannot reach the database) raises `lost`, which `body` should watch so that two
    /// holders never work for long at once. The lease is released when `body` ends.
    public func withLease<T: Sendable>(
        _ name: LeaseName, holder: String, duration: Duration = JobQueue.leaseDuration, lost: CancellationFlag,
        _ body: () async throws -> T
    ) async throws -> T? {
        guard try await acquireLease(name, holder: holder, for: duration) else { return nil }
        let renewal = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: duration / 3)
                guard !Task.isCancelled else { return }
                if (try? await renewLease(name, holder: holder, for: duration)) != true {
                    lost.cancel()
                    return
                }
            }
        }
        defer { renewal.cancel() }
        do {
            let value = try await body()
            renewal.cancel()
            try? await releaseLease(name, holder: holder)
            return value
        } catch {
            renewal.cancel()
            try? await releaseLease(name, holder: holder)
            throw error
        }
    }
}
