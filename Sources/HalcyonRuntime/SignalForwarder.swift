import Foundation

/// Turns signals (SIGTERM, SIGINT) into calls of a handler on a thread of its own, one call per
/// signal received.
///
/// Not a DispatchSource: on Linux libdispatch's signal sources lose signals that arrive soon
/// after the source is resumed (measured: a SIGTERM 50–300 ms after start was caught and never
/// delivered), and a worker told to stop must stop. The C handler only writes one byte to a
/// pipe (async-signal-safe); the thread reads the pipe and calls `handler`. One per process
/// (the C handler has a single pipe to write to).
public final class SignalForwarder: Sendable {
    private let pipe: (read: Int32, write: Int32)
    private let signals: [Int32]
    /// The actions in place before, restored by `cancel()`.
    nonisolated(unsafe) private var previous: [Int32: sigaction] = [:]

    /// The pipe the C handler writes to (a C function pointer cannot capture it).
    nonisolated(unsafe) private static var writeEnd: Int32 = -1

    public init(signals: [Int32], handler: @escaping @Sendable () -> Void) {
        var fds: [Int32] = [0, 0]
        precondition(Glibc.pipe(&fds) == 0, "pipe: \(String(cString: strerror(errno)))")
        pipe = (fds[0], fds[1])
        self.signals = signals
        Self.writeEnd = fds[1]
        for sig in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in
                var byte: UInt8 = 1
                _ = write(SignalForwarder.writeEnd, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            var old = sigaction()
            sigaction(sig, &action, &old)
            previous[sig] = old
        }
        let readEnd = fds[0]
        Thread.detachNewThread {
            // Threads inherit their creator's mask, and Swift's and Dispatch's threads block
            // most signals: unblocked here, there is always one thread that takes them.
            var set = sigset_t()
            sigemptyset(&set)
            for sig in signals { sigaddset(&set, sig) }
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            var byte: UInt8 = 0
            while true {
                let n = read(readEnd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }  // the write end closed: cancelled
                handler()
            }
        }
    }

    /// Restores the previous actions and ends the thread.
    public func cancel() {
        for sig in signals {
            if var old = previous[sig] { sigaction(sig, &old, nil) }
        }
        close(pipe.write)
    }
}
