import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// What the image process tells its supervisor, one line per event over a pipe: which jobs
/// entered processing (decode, steps, encode: where a fault in a C library can strike) and
/// which left it, `P 12,13` and `F 12,13`; and which jobs hold bytes in the process from their
/// fetch (download, kept original, watermarks) to their store, and when they stop, `H 12,13`
/// and `D 12,13` — a memory kill charges those too. A write of a line this short to a pipe is
/// atomic.
///
/// A `P` or `F` line made on the processing thread names it and its CPU time then
/// (`P 12,13 d 4711 93200000`: a shared decode, thread 4711, 93.2 ms; `c` for one job's chain),
/// so the supervisor knows what each job spent in processing, also when the process dies before
/// it can say (`ProcessingTracker.spent`).
public enum ProcessingReport: Equatable, Sendable {
    case started([Int64], ThreadTime? = nil)
    case finished([Int64], ThreadTime? = nil)
    case holding([Int64])
    case dropped([Int64])

    /// The thread a phase of processing runs on and the CPU time it had used when the report was
    /// made.
    public struct ThreadTime: Equatable, Sendable {
        /// The thread's kernel id (`/proc/PID/task/ID`).
        public var thread: Int32
        public var cpu: Duration
        /// The phase a `started` report opens is a group's shared decode (its CPU is split among
        /// the group's jobs as decode), not one job's steps and encode.
        public var decoding: Bool

        public init(thread: Int32, cpu: Duration, decoding: Bool = false) {
            self.thread = thread
            self.cpu = cpu
            self.decoding = decoding
        }

        /// The calling thread's, now; nil when its id cannot be read.
        public static func now(decoding: Bool = false) -> ThreadTime? {
            guard let thread = ThreadCPU.currentThread() else { return nil }
            return ThreadTime(thread: thread, cpu: .seconds(StageClock.threadCPUSeconds()), decoding: decoding)
        }

        var nanoseconds: Int64 {
            let (s, atto) = cpu.components
            return s * 1_000_000_000 + atto / 1_000_000_000
        }
    }

    /// Most ids on one line: 200 ids of up to 19 digits and the thread's time stay under
    /// PIPE_BUF (4096 bytes).
    static let idsPerLine = 200

    /// The report's lines.
    var lines: [String] {
        let (tag, ids, time): (String, [Int64], ThreadTime?) =
            switch self {
            case .started(let ids, let time): ("P", ids, time)
            case .finished(let ids, let time): ("F", ids, time)
            case .holding(let ids): ("H", ids, nil)
            case .dropped(let ids): ("D", ids, nil)
            }
        let suffix = time.map { " \($0.decoding ? "d" : "c") \($0.thread) \($0.nanoseconds)" } ?? ""
        return stride(from: 0, to: ids.count, by: Self.idsPerLine).map { start in
            tag + " " + ids[start..<min(start + Self.idsPerLine, ids.count)].map(String.init).joined(separator: ",") + suffix + "\n"
        }
    }

    /// One line (without its newline); nil for anything else.
    init?(line: Substring) {
        guard line.count >= 3, line.dropFirst().first == " " else { return nil }
        let fields = line.dropFirst(2).split(separator: " ", omittingEmptySubsequences: false)
        let ids = fields[0].split(separator: ",").compactMap { Int64($0) }
        guard !ids.isEmpty else { return nil }
        var time: ThreadTime?
        if fields.count == 4 {
            guard fields[1] == "d" || fields[1] == "c", let thread = Int32(fields[2]), let ns = Int64(fields[3]), ns >= 0 else { return nil }
            time = ThreadTime(thread: thread, cpu: .nanoseconds(ns), decoding: fields[1] == "d")
        } else if fields.count != 1 {
            return nil
        }
        switch line.first {
        case "P": self = .started(ids, time)
        case "F": self = .finished(ids, time)
        case "H" where time == nil: self = .holding(ids)
        case "D" where time == nil: self = .dropped(ids)
        default: return nil
        }
    }
}

/// The jobs a child process has in processing now, since when, and with how many others (the
/// jobs of one source are processed together: one decode, then each job's chain), from its
/// reports — and the CPU each has spent in processing.
///
/// CPU: a processing thread's CPU time between two reports made on it goes to the jobs of the
/// phase open on it, split evenly — a shared decode among the jobs it was made for (as their
/// decode), a chain to its job alone (as its process). The phase still open is counted up to the
/// latest `sample` of its thread (the supervisor samples at every look, and just before it ends
/// a process), so a job in processing when its process dies is charged what it spent up to then.
/// A job's count is forgotten when it stops holding bytes (`dropped`): its outcome is then the
/// process's to record, with its own timings.
final class ProcessingTracker: Sendable {
    private struct Entry {
        var since: ContinuousClock.Instant
        var group: Int
    }
    /// The phase open on a thread: its jobs, whether it is a shared decode, the thread's CPU at
    /// the last report that split it, and the latest CPU sampled.
    private struct Phase {
        var jobs: [Int64]
        var decoding: Bool
        var from: Duration
        var latest: Duration
    }
    /// CPU a job spent in processing: its shares of shared decodes, and its own chain.
    struct Spent: Equatable, Sendable {
        var decode: Duration = .zero
        var process: Duration = .zero
    }
    private struct State {
        var jobs: [Int64: Entry] = [:]
        var holders: Set<Int64> = []
        var phases: [Int32: Phase] = [:]
        var spent: [Int64: Spent] = [:]

        /// Splits the thread's CPU since the phase's last split among its jobs.
        mutating func split(_ thread: Int32, at cpu: Duration) {
            guard var phase = phases[thread], !phase.jobs.isEmpty else { return }
            let share = max(.zero, cpu - phase.from) / phase.jobs.count
            for id in phase.jobs {
                if phase.decoding { spent[id, default: Spent()].decode += share } else { spent[id, default: Spent()].process += share }
            }
            phase.from = max(phase.from, cpu)
            phase.latest = max(phase.latest, phase.from)
            phases[thread] = phase
        }
    }
    private let state = Mutex(State())
    /// The process whose threads `sample` reads.
    let process: pid_t

    /// A tracker of `process`'s reports (default: this process's own).
    init(process: pid_t = getpid()) {
        self.process = process
    }

    func apply(_ report: ProcessingReport, at now: ContinuousClock.Instant = .now) {
        state.withLock { s in
            switch report {
            case .started(let ids, let time):
                for id in ids { s.jobs[id] = Entry(since: now, group: ids.count) }
                guard let time else { return }
                s.split(time.thread, at: time.cpu)
                if var phase = s.phases[time.thread], !phase.jobs.isEmpty {
                    // The next line of a long report (or a phase never finished): one phase.
                    phase.jobs += ids.filter { !phase.jobs.contains($0) }
                    s.phases[time.thread] = phase
                } else {
                    s.phases[time.thread] = Phase(jobs: ids, decoding: time.decoding, from: time.cpu, latest: time.cpu)
                }
            case .finished(let ids, let time):
                for id in ids { s.jobs[id] = nil }
                if let time { s.split(time.thread, at: time.cpu) }
                let leaving = Set(ids)
                for (thread, var phase) in s.phases where phase.jobs.contains(where: leaving.contains) {
                    phase.jobs.removeAll(where: leaving.contains)
                    s.phases[thread] = phase.jobs.isEmpty ? nil : phase
                }
            case .holding(let ids): s.holders.formUnion(ids)
            case .dropped(let ids):
                s.holders.subtract(ids)
                for id in ids { s.spent[id] = nil }
            }
        }
    }

    /// The jobs in processing now.
    var current: Set<Int64> { state.withLock { Set($0.jobs.keys) } }

    /// The jobs holding bytes in the process now (in processing or not).
    var holding: Set<Int64> { state.withLock { $0.holders } }

    /// Reads the CPU time of the threads with a phase open (`/proc/PID/task/ID/schedstat`); a
    /// thread already gone keeps its last sample.
    func sample() {
        let threads = state.withLock { Array($0.phases.keys) }
        guard !threads.isEmpty else { return }
        let now = threads.compactMap { thread in ThreadCPU.seconds(thread: thread, process: process).map { (thread, Duration.seconds($0)) } }
        state.withLock { s in
            for (thread, cpu) in now where s.phases[thread] != nil {
                s.phases[thread]!.latest = max(s.phases[thread]!.latest, cpu)
            }
        }
    }

    /// What each job spent in processing in this process so far: the phases closed, and its share
    /// of the one open up to the latest sample. Jobs that spent nothing are absent.
    var spent: [Int64: Spent] {
        state.withLock { s in
            var spent = s.spent
            for phase in s.phases.values where !phase.jobs.isEmpty {
                let share = max(.zero, phase.latest - phase.from) / phase.jobs.count
                for id in phase.jobs {
                    if phase.decoding { spent[id, default: Spent()].decode += share } else { spent[id, default: Spent()].process += share }
                }
            }
            return spent
        }
    }

    /// The timings each job's attempt records when it ends here without an outcome of its own (a
    /// death, a kill, a stop): its CPU in processing, as decode and process (steps and encode).
    var timings: [Int64: StageTimings] {
        spent.mapValues { spent in
            var timings = StageTimings()
            timings.decodeCPU = spent.decode.seconds
            timings.processCPU = spent.process.seconds
            return timings
        }
    }

    /// The jobs in processing past their time: the decode and each job of the group get
    /// `deadline` each (the child's own deadlines), and then `grace`.
    func overdue(at now: ContinuousClock.Instant = .now, deadline: Duration, grace: Duration) -> [Int64] {
        state.withLock { s in
            s.jobs.filter { $0.value.since + deadline * ($0.value.group + 1) + grace < now }.map(\.key).sorted()
        }
    }

    /// Reads `fd` line by line until its end (the child closed it, or died), applying each
    /// report; on a thread of its own, since the read blocks. Closes `fd` at the end.
    func follow(_ fd: Int32, done: @escaping @Sendable () -> Void) {
        Thread.detachNewThread { [self] in
            var pending = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { break }
                pending.append(contentsOf: buffer[0..<n])
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    if let report = ProcessingReport(line: line[...]) { apply(report) }
                }
                // A line never exceeds PIPE_BUF; anything longer is not ours.
                if pending.count > 8192 { pending.removeAll() }
            }
            close(fd)
            done()
        }
    }
}
