import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonImage
import HalcyonQueue

/// Everything a worker needs to know, with the defaults `halcyon work` documents.
public struct WorkerConfiguration: Sendable {
    /// Unique per process. Default `<host>-<pid>-<random>`: a pid alone repeats across
    /// containers (pid 1 in every one sharing `--network host`).
    public var workerID: String
    /// Processing slots (concurrent decode/encode). Default: the number of cores.
    public var concurrency: Int
    /// Concurrent downloads, separate from processing. Default 8.
    public var fetchConcurrency: Int = 8
    /// Jobs claimed per round trip while ≥ 90 % of recent jobs were store hits. Default 250;
    /// at most concurrency + fetchConcurrency turns the larger claims off.
    public var hitClaimBatch: Int = 250
    /// How long a claim is leased for; renewed every lease/3. Default 30 s.
    public var lease: Duration = .seconds(30)
    /// Between polls when no notification arrives. Default 1 s.
    public var pollInterval: Duration = .seconds(1)
    /// Poll only, no LISTEN (for PgBouncer transaction pooling). Default false.
    public var pollOnly = false
    /// Exit once nothing is runnable now and nothing is running. Default false.
    public var drain = false
    /// What in-flight jobs get to finish after SIGTERM before they are released. Default 20 s.
    public var grace: Duration = .seconds(20)
    /// Deadline of every database statement (heartbeats and rescues: at most half the lease,
    /// at least 2 s). Past it the statement is cancelled and its connection reset. Default 30 s.
    public var statementTimeout: Duration = .seconds(30)
    /// Bytes of downloaded sources that may wait for a processing slot; a download starts only
    /// while fewer are waiting. Default 256 MiB. (Downloads in progress add at most
    /// fetchConcurrency × the download limit.)
    public var maxPendingBytes: Int = 256 << 20
    /// Between sweeps for expired leases. Default min(5 s, lease/3).
    public var rescueInterval: Duration?
    /// Backoff of transiently failed jobs.
    public var backoff = Backoff()
    public var fetch = FetchConfiguration()
    public var limits = ImageLimits()
    /// Root of the content-addressed store.
    public var storeRoot: URL
    /// Between store sweeps (one worker at a time sweeps); zero turns them off. Default 10 min.
    public var sweepInterval: Duration = .seconds(600)
    /// Bytes the store may hold before sweeps trim it to half by least recent access; nil for
    /// no limit (the default).
    public var storeSizeLimit: Int64?

    public init(storeRoot: URL, workerID: String? = nil, concurrency: Int? = nil) {
        self.storeRoot = storeRoot
        self.workerID = workerID ?? Self.defaultWorkerID()
        self.concurrency = max(1, concurrency ?? ProcessInfo.processInfo.activeProcessorCount)
    }

    public static func defaultWorkerID() -> String {
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        return "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(tag)"
    }

    /// The deadline of heartbeat and rescue statements: a slow one should end before the
    /// leases it renews do (and a loaded server gets at least 2 s).
    var maintenanceStatementTimeout: Duration { min(statementTimeout, max(.seconds(2), lease / 2)) }

    /// How often leases are renewed: three times per lease.
    var heartbeatInterval: Duration { lease / 3 }

    /// Jobs held at once: every processing slot busy plus every download slot busy.
    var maxInFlight: Int { concurrency + fetchConcurrency }

    /// Jobs claimed at once while nearly every recent job was a store hit (`hitClaimRatio`):
    /// hits take no slot and finish in well under a millisecond, so one round trip claims many.
    var maxInFlightForHits: Int { max(maxInFlight, hitClaimBatch) }
    /// The share of recent outcomes (an exponential average over about ten jobs) that must be
    /// store hits for the larger claims.
    static let hitClaimRatio = 0.9

    var effectiveRescueInterval: Duration { rescueInterval ?? max(.milliseconds(500), min(.seconds(5), lease / 3)) }
}
