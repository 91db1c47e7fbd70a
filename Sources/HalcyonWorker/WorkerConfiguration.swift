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
    /// Seconds a claim is leased for; renewed every lease/3. Default 30.
    public var lease: Double = 30
    /// Seconds between polls when no notification arrives. Default 1.
    public var pollInterval: Double = 1
    /// Poll only, no LISTEN (for PgBouncer transaction pooling). Default false.
    public var pollOnly = false
    /// Exit once nothing is runnable now and nothing is running. Default false.
    public var drain = false
    /// Seconds in-flight jobs get to finish after SIGTERM before they are released. Default 20.
    public var grace: Double = 20
    /// Deadline of every database statement, in seconds (heartbeats and rescues: at most
    /// half the lease, at least 2 s). Past it the statement is cancelled and its connection
    /// reset. Default 30.
    public var statementTimeout: Double = 30
    /// Bytes of downloaded sources that may wait for a processing slot; a download starts only
    /// while fewer are waiting. Default 256 MiB. (Downloads in progress add at most
    /// fetchConcurrency × the download limit.)
    public var maxPendingBytes: Int = 256 << 20
    /// Seconds between sweeps for expired leases. Default min(5, lease/3).
    public var rescueInterval: Double?
    /// Backoff of transiently failed jobs.
    public var backoff = Backoff()
    public var fetch = FetchConfiguration()
    public var limits = ImageLimits()
    /// Root of the content-addressed store.
    public var storeRoot: URL
    /// Seconds between store sweeps (one worker at a time sweeps); 0 turns them off. Default 600.
    public var sweepInterval: Double = 600
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
    var maintenanceStatementTimeout: Double { min(statementTimeout, max(2, lease / 2)) }

    /// Jobs held at once: every processing slot busy plus every download slot busy.
    var maxInFlight: Int { concurrency + fetchConcurrency }

    /// Jobs claimed at once while nearly every recent job was a store hit (`hitClaimRatio`):
    /// hits take no slot and finish in well under a millisecond, so one round trip claims many.
    var maxInFlightForHits: Int { max(maxInFlight, hitClaimBatch) }
    /// The share of recent outcomes (an exponential average over about ten jobs) that must be
    /// store hits for the larger claims.
    static let hitClaimRatio = 0.9

    var effectiveRescueInterval: Double { rescueInterval ?? max(0.5, min(5, lease / 3)) }
}
