import Foundation
import HalcyonQueue
import HalcyonRuntime

/// A progress line for `work --drain`, `demo` and `bench`: jobs done of the total, rate,
/// failures and ETA. On a terminal it is redrawn in place every half second on standard error;
/// otherwise a plain line is printed every 10 s (and once at the end), so logs stay readable.
/// It counts every worker's work (it reads the queue, not this process), which is what an
/// operator draining a queue wants to see.
package final class ProgressReporter: Sendable {
    private let task: Task<Void, Never>
    private let done = CancellationFlag()
    /// Cuts the wait between redraws short when `finish` is called (the command would
    /// otherwise exit up to half a second late).
    private let redraw = WakeSignal()

    /// `label`: what is counted (e.g. "jobs"). `expected`: the total when known (the demo and the
    /// bench know what they enqueued); otherwise done + runnable + running.
    package init(conninfo: String, label: String = "jobs", expected: Int? = nil, since: Date = Date()) {
        let tty = isatty(STDERR_FILENO) == 1
        let done = self.done, redraw = self.redraw
        task = Task.detached {
            guard let connection = try? await PGConnection.connect(conninfo, label: "progress") else { return }
            let queue = JobQueue(connection: connection)
            let started = Date()
            var lastPlain = Date.distantPast
            var last: String?
            var counted: JobQueue.Progress?
            var nextCount = ContinuousClock.now
            while true {
                let finishing = done.isCancelled
                // The counts read the table (a million queued rows take a few hundred ms to
                // count): they are refreshed at most every twenty times what they took, so the
                // line costs the database at most ~5 % of one backend, however large the queue.
                if finishing || ContinuousClock.now >= nextCount {
                    let started = ContinuousClock.now
                    if let p = try? await queue.progress(since: since) { counted = p }
                    nextCount = ContinuousClock.now + max(.milliseconds(500), (ContinuousClock.now - started) * 20)
                }
                if let p = counted {
                    let line = Self.line(p, label: label, expected: expected, elapsed: Date().timeIntervalSince(started))
                    if tty {
                        writeToStandardError("\r\u{1B}[K\(line)\(finishing ? "\n" : "")")
                    } else if finishing || Date().timeIntervalSince(lastPlain) >= 10, line != last {
                        writeToStandardError("progress: \(line)\n")
                        lastPlain = Date()
                        last = line
                    }
                }
                if finishing { break }
                await redraw.wait(timeout: .milliseconds(500))
            }
            await connection.close()
        }
    }

    /// Draws the final line and stops.
    package func finish() async {
        done.cancel()
        redraw.wake()
        await task.value
    }

    /// `120/400 jobs (3 failed) · 35.2/s · ETA 8s`
    package static func line(_ p: JobQueue.Progress, label: String, expected: Int?, elapsed: Double) -> String {
        let finished = p.succeeded + p.failed
        let total = max(expected ?? (finished + p.runnable + p.running), finished)
        let rate = elapsed > 0 ? Double(finished) / elapsed : 0
        var line = "\(finished)/\(total) \(label)"
        if p.failed > 0 { line += " (\(p.failed) failed)" }
        line += String(format: " · %.1f/s", rate)
        let remaining = total - finished
        if remaining == 0 {
            line += " · done in \(TimeSpan.format(elapsed.rounded()))"
        } else if rate > 0 {
            line += " · ETA \(TimeSpan.format((Double(remaining) / rate).rounded(.up)))"
        }
        return line
    }
}
