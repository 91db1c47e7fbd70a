import Foundation

/// Unix socket pairs held open for a test, to make this process's socket tables (and the
/// machine's `/proc/net/unix`) long, as a busy machine's are. Close-on-exec, so that processes
/// other tests start meanwhile do not inherit them. Closed by `close()`.
public struct HeldSockets: Sendable {
    public let descriptors: [Int32]

    /// Opens `pairs` socket pairs (twice as many sockets).
    public init(pairs: Int) throws {
        // Room for them beside what the test process holds: the soft descriptor limit raised
        // toward the hard one when it is lower (1,024 is a common default).
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(2 * pairs + 4096) {
            limit.rlim_cur = min(limit.rlim_max, rlim_t(2 * pairs + 4096))
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        var fds: [Int32] = []
        for _ in 0..<pairs {
            var pair: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
                for fd in fds { Glibc.close(fd) }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            fds += pair
        }
        descriptors = fds
    }

    /// The sockets' inode numbers, as `/proc/net/unix` lists them.
    public func inodes() throws -> Set<String> {
        Set(
            try descriptors.map { fd in
                String(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)").dropFirst("socket:[".count).dropLast())
            })
    }

    public func close() { for fd in descriptors { Glibc.close(fd) } }
}
