import Foundation
import HalcyonRuntime
import Logging
import Synchronization

/// Listens on a channel with its own connection, on its own thread (it sits in `poll(2)` on the
/// libpq socket), and calls `onNotify` with the payloads that arrived. Once listening — at
/// first, and after each reconnection (with backoff) when the connection drops — it calls
/// `onNotify` with no payloads: notifications sent while it was not listening are lost, so
/// whoever listens checks the table then.
public final class JobListener: Sendable {
    /// Workers are woken on this channel when jobs may be runnable.
    public static let channel = "halcyon_jobs"
    /// A job reached `succeeded`, `failed` or `cancelled`; the payload is a small JSON object.
    public static let finishedChannel = "halcyon_job_finished"

    private let conninfo: String
    /// Sends the channel's LISTEN, on the connection's thread.
    private let listen: @Sendable (PGConnection) throws -> Int
    private let onNotify: @Sendable ([String]) -> Void
    private let stopped = Atomic<Bool>(false)
    private let logger: Logger

    /// `channel` is `JobListener.channel` or `JobListener.finishedChannel` (session.sql has a
    /// LISTEN statement for each).
    public init(conninfo: String, channel: String = JobListener.channel, logger: Logger, onNotify: @escaping @Sendable ([String]) -> Void) {
        self.conninfo = conninfo
        switch channel {
        case Self.channel: listen = { try $0.runLocked(SQL.ListenJobs()) }
        case Self.finishedChannel: listen = { try $0.runLocked(SQL.ListenFinished()) }
        default: preconditionFailure("no LISTEN statement for channel '\(channel)'")
        }
        self.logger = logger
        self.onNotify = onNotify
    }

    /// Listens on `halcyon_jobs` and calls `onNotify` at each wake-up.
    public convenience init(conninfo: String, logger: Logger, onNotify: @escaping @Sendable () -> Void) {
        self.init(conninfo: conninfo, channel: Self.channel, logger: logger) { _ in onNotify() }
    }

    /// Starts the listening thread. It runs until `stop()`.
    public func start() {
        let thread = Thread { [self] in self.loop() }
        thread.name = "halcyon.listen"
        thread.start()
    }

    public func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    /// The wait before reconnecting: 0.1 s after the first failure, doubling to 5 s.
    static let reconnect = Backoff(doubling: .milliseconds(100), upTo: .seconds(5))

    private func loop() {
        var failures = 0
        while !stopped.load(ordering: .relaxed) {
            do {
                let connection = try PGConnection.connectBlocking(conninfo, label: "listen")
                try connection.sync { [listen] in _ = try listen(connection) }
                failures = 0
                onNotify([])
                try listen(on: connection)
            } catch {
                guard !stopped.load(ordering: .relaxed) else { return }
                failures += 1
                let delay = Self.reconnect.delay(afterAttempt: failures).seconds
                logger.warning("listen connection lost; reconnecting", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(delay))"])
                Thread.sleep(forTimeInterval: delay)
            }
        }
    }

    private func listen(on connection: PGConnection) throws {
        while !stopped.load(ordering: .relaxed) {
            let fd = try connection.sync { connection.socketLocked() }
            guard fd >= 0 else { throw DatabaseError(message: "no socket", connectionLost: true) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&pfd, 1, 250)
            if n < 0 && errno != EINTR { throw DatabaseError(message: "poll failed: errno \(errno)", connectionLost: true) }
            if n > 0 {
                let payloads = try connection.sync { try connection.consumeNotificationsLocked() }
                if !payloads.isEmpty { onNotify(payloads) }
            }
        }
    }
}
