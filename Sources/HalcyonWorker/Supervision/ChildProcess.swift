import Foundation
import HalcyonDomain
import HalcyonRuntime

/// The supervisor's child: `halcyon work` again, doing the image work, with the write end of a
/// pipe as file descriptor 3 (`SupervisorChannel`) and the supervisor's standard output and
/// error.
struct ChildProcess: Sendable {
    let pid: pid_t
    /// The read end of the reports pipe.
    let reports: Int32

    /// How a child ended.
    enum Exit: Equatable, Sendable {
        case exited(Int32)
        case signaled(Int32)
    }

    static func spawn(executable: String, arguments: [String], environment: [String: String]) throws(HalcyonError) -> ChildProcess {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw HalcyonError(.internal, "cannot make the supervisor's pipe: \(String(cString: strerror(errno)))")
        }
        // The supervisor starts nothing else meanwhile, so setting close-on-exec after the
        // pipe is made (pipe2 is not in Glibc's module) races with nothing.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copy: only fd 3 reaches the child.
        posix_spawn_file_actions_adddup2(&actions, fds[1], 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child takes its stop requests from the supervisor alone (`Supervisor.stopSignal`):
        // a SIGTERM or SIGINT sent to the whole group (Ctrl-C in a terminal, systemd's
        // control-group kill) reaches the supervisor, which passes it on once. All three start
        // blocked: SIGTERM and SIGINT until the child ignores them, the stop signal until the
        // child's handler takes it (one sent earlier waits, pending, instead of killing it).
        var blocked = sigset_t(), defaults = sigset_t()
        sigemptyset(&blocked)
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, Supervisor.stopSignal] { sigaddset(&blocked, s) }
        for s in [SIGPIPE, SIGHUP, Supervisor.stopSignal] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigmask(&attributes, &blocked)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw HalcyonError(.internal, "cannot start the worker process \(executable): \(String(cString: strerror(rc)))")
        }
        return ChildProcess(pid: pid, reports: fds[0])
    }

    /// How the child ended, or nil while it runs (`block`: wait for it).
    func exit(block: Bool) -> Exit? {
        var status: Int32 = 0
        while true {
            let r = waitpid(pid, &status, block ? 0 : WNOHANG)
            if r == -1, errno == EINTR { continue }
            guard r == pid else { return nil }
            break
        }
        // WIFEXITED / WIFSIGNALED, spelled out: the C macros are not imported.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }

    /// The child's resident set now, in bytes.
    var residentBytes: Int? { ProcessMemory.residentRSS(of: pid) }

    /// True while the Swift runtime's crash handler is writing the child's backtrace: the child
    /// has crashed and will die once `swift-backtrace`, which it started, is done (within the
    /// backtracer's own timeout). Until then it looks like a process stuck in one call.
    var isWritingABacktrace: Bool {
        let tasks = "/proc/\(pid)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return false }
        for thread in threads {
            guard let children = KernelFile.text("\(tasks)/\(thread)/children") else { continue }
            for child in children.split(separator: " ") {
                let name = KernelFile.text("/proc/\(child)/comm") ?? ""
                if name.hasPrefix("swift-backtrace") { return true }
            }
        }
        return false
    }
}
