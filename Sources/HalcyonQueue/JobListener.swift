import Foundation
import HalcyonCore
import Logging
import Synchronization

/// Listens on the `halcyon_jobs` channel with its own connection, on its own thread (it sits in
/// `poll(2)` on the libpq socket), and calls `onNotify` when jobs may be runnable. When the
/// connection drops it reconnects with backoff and calls `onNotify` once, since notifications
/// sent meanwhile are lost.
public final class JobListener: Sendable {
    public static let channel = "halcyon_jobs"

    private let conninfo: String
    private let onNotify: @Sendable () -> Void
    private let stopped = Atomic<Bool>(false)
    private let logger: Logger

    public init(conninfo: String, logger: Logger, onNotify: @escaping @Sendable () -> Void) {
        self.conninfo = conninfo
        self.logger = logger
        self.onNotify = onNotify
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

    private func loop() {
        var delay = 0.1
        while !stopped.load(ordering: .relaxed) {
            do {
                let connection = try PGConnection.connectBlocking(conninfo, label: "listen")
                try connection.sync { _ = try connection.executeLocked("LISTEN \(Self.channel)") }
                delay = 0.1
                onNotify()
                try listen(on: connection)
            } catch {
                guard !stopped.load(ordering: .relaxed) else { return }
                logger.warning("listen connection lost; reconnecting", metadata: ["error": "\(error)", "retry_in": "\(TimeSpan.format(delay))"])
                Thread.sleep(forTimeInterval: delay)
                delay = min(delay * 2, 5)
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
                let channels = try connection.sync { try connection.consumeNotificationsLocked() }
                if !channels.isEmpty { onNotify() }
            }
        }
    }
}
