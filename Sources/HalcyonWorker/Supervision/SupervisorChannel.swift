import Foundation

/// The image process's end of its supervisor's pipe (`HALCYON_SUPERVISOR_FD`): the worker tells
/// it which jobs enter and leave processing. A write is one `write(2)` of a short line — no
/// database round trip, a few microseconds — and a failed one (the supervisor gone) is ignored.
public final class SupervisorChannel: Sendable {
    /// The environment variable naming the pipe's file descriptor in a child process.
    public static let environmentKey = "HALCYON_SUPERVISOR_FD"
    let fd: Int32

    public init(fd: Int32) {
        self.fd = fd
    }

    /// The channel a supervisor handed this process, if any.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> SupervisorChannel? {
        guard let text = environment[environmentKey], let fd = Int32(text), fd > 2, fcntl(fd, F_GETFD) != -1 else { return nil }
        return SupervisorChannel(fd: fd)
    }

    public func report(_ report: ProcessingReport) {
        for line in report.lines {
            var bytes = Array(line.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return }
                offset += n
            }
        }
    }
}
