import Foundation
import Synchronization

/// What the image process tells its supervisor, one line per event over a pipe: which jobs
/// entered processing (decode, steps, encode: where a fault in a C library can strike) and
/// which left it, `P 12,13` and `F 12,13`; and which jobs hold bytes in the process from their
/// fetch (download, kept original, watermarks) to their store, and when they stop, `H 12,13`
/// and `D 12,13` — a memory kill charges those too. A write of a line this short to a pipe is
/// atomic.
public enum ProcessingReport: Equatable, Sendable {
    case started([Int64])
    case finished([Int64])
    case holding([Int64])
    case dropped([Int64])

    /// Most ids on one line: 200 ids of up to 19 digits stay under PIPE_BUF (4096 bytes).
    static let idsPerLine = 200

    /// The report's lines.
    var lines: [String] {
        let (tag, ids): (String, [Int64]) =
            switch self {
            case .started(let ids): ("P", ids)
            case .finished(let ids): ("F", ids)
            case .holding(let ids): ("H", ids)
            case .dropped(let ids): ("D", ids)
            }
        return stride(from: 0, to: ids.count, by: Self.idsPerLine).map { start in
            tag + " " + ids[start..<min(start + Self.idsPerLine, ids.count)].map(String.init).joined(separator: ",") + "\n"
        }
    }

    /// One line (without its newline); nil for anything else.
    init?(line: Substring) {
        guard line.count >= 3, line.dropFirst().first == " " else { return nil }
        let ids = line.dropFirst(2).split(separator: ",").compactMap { Int64($0) }
        guard !ids.isEmpty else { return nil }
        switch line.first {
        case "P": self = .started(ids)
        case "F": self = .finished(ids)
        case "H": self = .holding(ids)
        case "D": self = .dropped(ids)
        default: return nil
        }
    }
}

/// The jobs a child process has in processing now, since when, and with how many others (the
/// jobs of one source are processed together: one decode, then each job's chain), from its
/// reports.
final class ProcessingTracker: Sendable {
    private struct Entry {
        var since: ContinuousClock.Instant
        var group: Int
    }
    private let jobs = Mutex<[Int64: Entry]>([:])
    private let holders = Mutex<Set<Int64>>([])

    func apply(_ report: ProcessingReport, at now: ContinuousClock.Instant = .now) {
        switch report {
        case .started(let ids): jobs.withLock { jobs in for id in ids { jobs[id] = Entry(since: now, group: ids.count) } }
        case .finished(let ids): jobs.withLock { jobs in for id in ids { jobs[id] = nil } }
        case .holding(let ids): holders.withLock { $0.formUnion(ids) }
        case .dropped(let ids): holders.withLock { $0.subtract(ids) }
        }
    }

    /// The jobs in processing now.
    var current: Set<Int64> { jobs.withLock { Set($0.keys) } }

    /// The jobs holding bytes in the process now (in processing or not).
    var holding: Set<Int64> { holders.withLock { $0 } }

    /// The jobs in processing past their time: the decode and each job of the group get
    /// `deadline` each (the child's own deadlines), and then `grace`.
    func overdue(at now: ContinuousClock.Instant = .now, deadline: Duration, grace: Duration) -> [Int64] {
        jobs.withLock { jobs in
            jobs.filter { $0.value.since + deadline * ($0.value.group + 1) + grace < now }.map(\.key).sorted()
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
