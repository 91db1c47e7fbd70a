import Foundation

/// Starts programs with `posix_spawn` and reaps them with `waitpid`. Foundation's `Process`
/// on Linux can miss the exit of a short-lived child and wait forever (seen with `pg_ctl`).
public enum Subprocess {
    /// Starts `path args…` with standard input from /dev/null and standard output and error
    /// appended to `outputPath`. `environment` nil inherits this process's environment.
    public static func spawn(
        _ path: String, _ args: [String], outputPath: String,
        environment: [String: String]? = nil, newProcessGroup: Bool = false
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { env in env.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { envp?.forEach { free($0) } }
        // The child starts with no signal blocked and every signal at its default action.
        // Without this it inherits the spawning thread's mask — Dispatch worker threads block
        // SIGTERM and friends — and could never be stopped by a plain `kill`.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // `newProcessGroup`: the child leads a group of its own (pgid = its pid), so it and
        // whatever it starts can be signalled together.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (newProcessGroup ? POSIX_SPAWN_SETPGROUP : 0)))
        var pid: pid_t = 0
        let rc =
            envp.map { e in e.withUnsafeBufferPointer { posix_spawn(&pid, path, &actions, &attributes, argv, $0.baseAddress) } }
            ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard rc == 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot run \(path): \(String(cString: strerror(rc)))"])
        }
        return pid
    }

    /// The exit status of `pid` once it has ended (128 + signal when killed), nil while it runs.
    /// With `block`, waits for it.
    public static func status(of pid: pid_t, block: Bool) -> Int32? {
        reap(pid, block: block)?.status
    }

    /// `status(of:block:)` with the CPU time (user and system, seconds) the process and the
    /// descendants it reaped used, as `wait4` reports it.
    public static func reap(_ pid: pid_t, block: Bool) -> (status: Int32, cpuSeconds: Double)? {
        var status: Int32 = 0
        var usage = rusage()
        while true {
            let r = wait4(pid, &status, block ? 0 : WNOHANG, &usage)
            if r == 0 { return nil }
            if r < 0 {
                if errno == EINTR { continue }
                return (-1, 0)
            }
            let signal = status & 0x7F
            func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
            return (signal == 0 ? (status >> 8) & 0xFF : 128 + signal, seconds(usage.ru_utime) + seconds(usage.ru_stime))
        }
    }

    /// Runs `path args…` to completion; returns its exit status. `environment` nil inherits this
    /// process's environment.
    public static func run(_ path: String, _ args: [String], outputPath: String, environment: [String: String]? = nil) throws -> Int32 {
        let pid = try spawn(path, args, outputPath: outputPath, environment: environment)
        return status(of: pid, block: true) ?? -1
    }
}
