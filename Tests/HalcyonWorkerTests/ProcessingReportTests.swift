import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

@testable import HalcyonWorker

/// The image process's reports to its supervisor: lines that fit one atomic pipe write, read
/// back as they were written, and the set of jobs in processing they describe.
@Suite struct ProcessingReportTests {
    @Test func linesRoundTripAndStayUnderPipeBuf() {
        let ids = (0..<450).map { Int64.max - Int64($0) }
        let lines = ProcessingReport.started(ids).lines
        #expect(lines.count == 3)
        #expect(lines.allSatisfy { $0.utf8.count <= 4096 && $0.hasSuffix("\n") })
        let back = lines.compactMap { ProcessingReport(line: $0.dropLast()) }
        #expect(back.flatMap { report -> [Int64] in if case .started(let ids, _) = report { return ids } else { return [] } } == ids)
        #expect(ProcessingReport(line: "F 7") == .finished([7]))
        for junk in ["", "P", "P ", "X 1", "P1", "P x,y", "P 1 d 4", "P 1 x 4 5", "P 1 d 4 -5", "H 1 d 4 5", "P 1 d 4 5 6"] {
            #expect(ProcessingReport(line: Substring(junk)) == nil, "\(junk)")
        }
        // With the thread and its CPU time: every line of a long report carries them, within PIPE_BUF.
        let time = ProcessingReport.ThreadTime(thread: Int32.max, cpu: .nanoseconds(Int64.max / 2), decoding: true)
        let timed = ProcessingReport.started(ids, time).lines
        #expect(timed.count == 3 && timed.allSatisfy { $0.utf8.count <= 4096 })
        #expect(
            timed.compactMap { ProcessingReport(line: $0.dropLast()) } == [
                .started(Array(ids[0..<200]), time), .started(Array(ids[200..<400]), time), .started(Array(ids[400...]), time),
            ])
        #expect(ProcessingReport.finished([3, 4], .init(thread: 99, cpu: .milliseconds(93))).lines == ["F 3,4 c 99 93000000\n"])
        #expect(ProcessingReport(line: "P 5 c 12 1500") == .started([5], .init(thread: 12, cpu: .nanoseconds(1500))))
    }

    /// The CPU between two reports on a thread goes to the jobs of the phase open on it: a shared
    /// decode split evenly among its jobs (as decode), a chain to its job (as process). A long
    /// report's lines are one phase; a job forgotten once it stops holding bytes.
    @Test func theTrackerSplitsEachThreadsCPUAmongTheJobsOfItsPhase() {
        let tracker = ProcessingTracker()
        func at(_ ms: Double, decoding: Bool = false, thread: Int32 = 7) -> ProcessingReport.ThreadTime {
            .init(thread: thread, cpu: .milliseconds(ms), decoding: decoding)
        }
        tracker.apply(.holding([1, 2, 3, 4]))
        tracker.apply(.started([1, 2, 3], at(100, decoding: true)))
        tracker.apply(.started([4], at(50, thread: 8)))  // another group, on another thread
        tracker.apply(.finished([1, 2, 3], at(130)))
        tracker.apply(.started([2], at(130)))
        tracker.apply(.finished([2], at(190)))
        tracker.apply(.started([3], at(190)))
        tracker.apply(.finished([4], at(80, thread: 8)))
        let ms = { (d: Duration) in (d.seconds * 1e6).rounded() / 1e3 }
        let spent = tracker.spent
        #expect(spent.mapValues { [ms($0.decode), ms($0.process)] } == [1: [10, 0], 2: [10, 60], 3: [10, 0], 4: [0, 30]], "\(spent)")
        #expect(abs((tracker.timings[2]?.decodeCPU ?? 0) - 0.01) < 1e-9 && abs((tracker.timings[2]?.processCPU ?? 0) - 0.06) < 1e-9)
        // The phase still open (job 3's chain) counts nothing until its thread is sampled.
        #expect(tracker.current == [3])
        tracker.apply(.dropped([1, 2]))
        #expect(tracker.spent.keys.sorted() == [3, 4])

        // 450 jobs of one decode, reported on three lines: one phase, split 450 ways.
        let many = ProcessingTracker()
        let ids = (1...450).map(Int64.init)
        for line in ProcessingReport.started(ids, at(0, decoding: true)).lines { many.apply(ProcessingReport(line: line.dropLast())!) }
        for line in ProcessingReport.finished(ids, at(450)).lines { many.apply(ProcessingReport(line: line.dropLast())!) }
        #expect(
            many.spent.count == 450 && many.spent.values.allSatisfy { ms($0.decode) == 1 },
            "\(many.spent.values.map { ms($0.decode) }.sorted().suffix(3))")
    }

    /// A phase still open is counted up to the last sample of its thread (`/proc/…/schedstat`),
    /// which is what a supervisor has when its child dies mid-call: here this test's own thread,
    /// computing for a while.
    @Test func aSampleCountsTheOpenPhaseUpToTheThreadsOwnCPU() throws {
        let tracker = ProcessingTracker()
        let start = try #require(ProcessingReport.ThreadTime.now())
        tracker.apply(.started([9], start))
        var x = 1.0
        let until = StageClock.threadCPUSeconds() + 0.2
        while StageClock.threadCPUSeconds() < until { for i in 0..<1000 { x = x * 1.000001 + Double(i) } }
        tracker.sample()
        let used = StageClock.threadCPUSeconds() - start.cpu.seconds
        let charged = try #require(tracker.spent[9]).process.seconds
        // The scheduler's count lags the thread's clock by at most a tick; nothing more.
        #expect(charged <= used + 0.001 && charged >= used - 0.02, "charged \(charged) s of the \(used) s the thread used (\(x))")
        #expect(try #require(tracker.spent[9]).decode == .zero)
    }

    @Test func theTrackerKnowsWhatIsInProcessingAndSinceWhen() {
        let tracker = ProcessingTracker()
        let t0 = ContinuousClock.now
        tracker.apply(.started([1, 2]), at: t0)
        tracker.apply(.started([3]), at: t0 + .seconds(10))
        tracker.apply(.finished([2]), at: t0 + .seconds(11))
        #expect(tracker.current == [1, 3])
        // Job 1 came with one other: the decode and two chains get 2 s each, then 1 s of grace.
        #expect(tracker.overdue(at: t0 + .seconds(6), deadline: .seconds(2), grace: .seconds(1)).isEmpty)
        #expect(tracker.overdue(at: t0 + .seconds(8), deadline: .seconds(2), grace: .seconds(1)) == [1])
        #expect(tracker.overdue(at: t0 + .seconds(16), deadline: .seconds(2), grace: .seconds(1)) == [1, 3])
    }

    @Test func holdersAreTrackedApartFromProcessing() {
        let tracker = ProcessingTracker()
        tracker.apply(.holding([1, 2, 3]))
        tracker.apply(.started([2]))
        tracker.apply(.dropped([1]))
        #expect(tracker.holding == [2, 3])
        #expect(tracker.current == [2])
        #expect(ProcessingReport(line: "H 4,5") == .holding([4, 5]) && ProcessingReport(line: "D 4") == .dropped([4]))
        #expect(ProcessingReport.dropped([9]).lines == ["D 9\n"])
    }

    /// Who pays for a death: a stuck job alone fails for good and the job beside it is a
    /// bystander (retried, not counted towards its poison pill); a fault, a SIGKILL or a memory
    /// kill charges the jobs in processing, and a memory kill with none in processing the jobs
    /// holding bytes.
    @Test func aDeathChargesOnlyTheJobsThatCausedIt() {
        let held = [CrashCharges.Held(id: 1, crashes: 0), .init(id: 2, crashes: 1), .init(id: 3, crashes: 0), .init(id: 4, crashes: 0)]
        func charges(_ cause: Supervisor.Cause) -> CrashCharges {
            CrashCharges(cause: cause, held: held, inProcessing: [1, 2], holdingBytes: [1, 2, 3], poisonAfter: 2, maxJobTime: .seconds(3))
        }
        let stuck = charges(.stuck([1]))
        #expect(stuck.charged.map(\.id) == [1, 2] && stuck.released == [3, 4])
        #expect(stuck.charged[0].error.code == .tooCostly && stuck.charged[0].error.permanent)
        let bystander = stuck.charged[1].error
        #expect(bystander.code == .workerCrashed && !bystander.permanent && bystander.bystander, "\(bystander)")
        #expect(bystander.errorEntry["bystander"]?.boolValue == true)
        #expect(stuck.poisoned.isEmpty, "job 2 has one crash already, but a bystander's charge is not one")

        let memory = charges(.memory(resident: 300 << 20, limit: 200 << 20))
        #expect(memory.charged.map(\.id) == [1, 2] && memory.released == [3, 4])
        #expect(memory.poisoned == [2])
        #expect(charges(.signal(SIGKILL)).charged.map(\.id) == [1, 2])
        let killedWhileDownloading = CrashCharges(
            cause: .signal(SIGKILL), held: held, inProcessing: [], holdingBytes: [1, 3], poisonAfter: 2, maxJobTime: .seconds(3))
        #expect(killedWhileDownloading.charged.isEmpty, "a SIGKILL from outside charges the jobs in processing only")
        let downloads = CrashCharges(
            cause: .memory(resident: 300 << 20, limit: 200 << 20), held: held, inProcessing: [], holdingBytes: [1, 3], poisonAfter: 2,
            maxJobTime: .seconds(3))
        #expect(downloads.charged.map(\.id) == [1, 3] && downloads.released == [2, 4])
        #expect(downloads.charged[1].error.message.contains("holding its source's bytes"), "\(downloads.charged[1].error.message)")

        let segv = charges(.signal(SIGSEGV))
        #expect(segv.charged.map(\.id) == [1, 2] && segv.released == [3, 4])
        #expect(segv.charged.allSatisfy { $0.error.code == .workerCrashed && !$0.error.bystander })
    }

    /// Through a real pipe, as the child writes it: every report arrives, and the end of the
    /// pipe ends the reader.
    @Test func theChannelReachesTheTracker() async throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let tracker = ProcessingTracker()
        let done = CancellationFlagBox()
        tracker.follow(fds[0]) { done.set() }
        let channel = SupervisorChannel(fd: fds[1])
        channel.report(.started(Array(1...300)))
        channel.report(.finished(Array(1...299)))
        close(fds[1])
        for _ in 0..<100 where !done.isSet { try await Task.sleep(for: .milliseconds(20)) }
        #expect(done.isSet)
        #expect(tracker.current == [300])
    }
}

/// A flag set from the reader's thread.
private final class CancellationFlagBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
