import HalcyonRuntime
import Synchronization

/// Politeness towards origins: at most `perHost` downloads from one host at a time across a
/// worker, and a host that asked for a pause (`429`/`503`, or any transient status, with
/// `Retry-After`) gets no request from this worker until the pause is over — not only the job
/// that got the answer. Waiting for a host holds no download slot, so other hosts go on.
public final class HostLimiter: Sendable {
    private struct Host {
        let slots: AsyncSemaphore
        /// Downloads waiting for or holding a permit.
        var users = 0
        var pausedUntil: ContinuousClock.Instant?
    }

    /// Downloads at once per host.
    public let perHost: Int
    /// The longest pause a `Retry-After` can impose.
    public let maxPause: Duration
    private let hosts = Mutex<[String: Host]>([:])

    public init(perHost: Int, maxPause: Duration) {
        self.perHost = max(1, perHost)
        self.maxPause = maxPause
    }

    /// Runs `body` holding one of `host`'s permits, once any pause of the host is over; nil
    /// without running it when `cancel` is raised first.
    public func withPermit<T>(host: String, cancel: CancellationFlag, _ body: () async -> T) async -> T? {
        let slots = hosts.withLock { hosts in
            hosts[host, default: Host(slots: AsyncSemaphore(perHost))].users += 1
            return hosts[host]!.slots
        }
        defer {
            hosts.withLock { hosts in
                hosts[host]?.users -= 1
                if let h = hosts[host], h.users == 0, (h.pausedUntil.map { $0 <= .now } ?? true) { hosts[host] = nil }
            }
        }
        guard await slots.wait(cancel: cancel) else { return nil }
        defer { slots.signal() }
        while let until = pausedUntil(host), until > .now {
            guard await cancel.sleep(seconds: (until - .now).seconds) else { return nil }
        }
        return await body()
    }

    /// Pauses `host` for `duration` (at most `maxPause`); a longer pause already set stays.
    public func pause(_ host: String, for duration: Duration) {
        let until = ContinuousClock.now + min(duration, maxPause)
        hosts.withLock { hosts in
            // Forget pauses that are over on hosts nobody is using, so the table stays small.
            for (name, h) in hosts where h.users == 0 && (h.pausedUntil.map { $0 <= .now } ?? true) { hosts[name] = nil }
            var h = hosts[host] ?? Host(slots: AsyncSemaphore(perHost))
            h.pausedUntil = max(h.pausedUntil ?? until, until)
            hosts[host] = h
        }
    }

    /// When `host`'s pause ends, if it is paused.
    public func pausedUntil(_ host: String) -> ContinuousClock.Instant? {
        hosts.withLock { $0[host]?.pausedUntil }
    }

    /// Hosts being tracked (in use or paused), for tests.
    var trackedHosts: Int { hosts.withLock { $0.count } }
}
