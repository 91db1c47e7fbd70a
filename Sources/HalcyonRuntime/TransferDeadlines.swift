/// The time limits of one transfer — the whole transfer's, and the low-speed abort's — counted on
/// the time the transfer runs, not the time its `TransferMeter` held it back. libcurl's own
/// limits (`CURLOPT_TIMEOUT`, `CURLOPT_LOW_SPEED_*`) count every second from the start,
/// so a transfer paused by a byte budget ran out of them while it waited; its owner keeps these
/// instead, from libcurl's progress callback (about once a second even when nothing arrives).
///
/// Owned by one transfer and used on its thread only.
public struct TransferDeadlines {
    /// Longest the transfer may run (time held back not counted); nil for no limit.
    public let total: Duration?
    /// The transfer fails when fewer than `lowSpeedBytes` a second arrive over `lowSpeedTime`
    /// of running time; 0 bytes or a zero time turns the check off.
    public let lowSpeedBytes: Int
    public let lowSpeedTime: Duration
    private let started: ContinuousClock.Instant
    /// Time the meter held the transfer back so far.
    public private(set) var heldBack: Duration = .zero
    /// Where the current low-speed window began: running time and bytes received then. Nil until
    /// the request is under way (the connection is bounded by its own timeout).
    private var mark: (running: Duration, bytes: Int)?

    public init(total: Duration?, lowSpeedBytes: Int, lowSpeedTime: Duration, now: ContinuousClock.Instant = .now) {
        self.total = total
        self.lowSpeedBytes = lowSpeedBytes
        self.lowSpeedTime = lowSpeedTime
        self.started = now
    }

    /// The transfer was held back for `duration` (by its meter, in the body callback).
    public mutating func heldBack(for duration: Duration) {
        heldBack += max(.zero, duration)
    }

    /// Time the transfer has run at `now`: since it started, less the time it was held back.
    public func running(at now: ContinuousClock.Instant = .now) -> Duration {
        now - started - heldBack
    }

    /// Nil while the transfer is within its limits; otherwise why it is over one, as a message
    /// for `fetch.timeout`. `bytes` is what has arrived so far; `underWay` says whether the
    /// request has been sent (the low-speed window starts then, as libcurl's does).
    public mutating func check(bytes: Int, underWay: Bool, now: ContinuousClock.Instant = .now) -> String? {
        let running = running(at: now)
        if let total, running > total {
            return "not finished after \(TimeSpan.format(total)) of transfer" + heldBackNote
        }
        guard lowSpeedBytes > 0, lowSpeedTime > .zero, underWay else { return nil }
        guard let mark else {
            self.mark = (running, bytes)
            return nil
        }
        let span = running - mark.running
        let quota = Double(lowSpeedBytes) * lowSpeedTime.seconds
        if Double(bytes - mark.bytes) >= quota {
            // Fast enough over a whole window's worth of bytes: the next window starts here.
            self.mark = (running, bytes)
            return nil
        }
        guard span >= lowSpeedTime else { return nil }
        return "slower than \(lowSpeedBytes) bytes/s for \(TimeSpan.format(lowSpeedTime)) (\(bytes - mark.bytes) bytes in \(TimeSpan.format(span)))"
            + heldBackNote
    }

    private var heldBackNote: String {
        heldBack >= .milliseconds(1) ? "; the \(TimeSpan.format(heldBack)) it was held back by the download budget not counted" : ""
    }
}
