import Foundation
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
        #expect(back.flatMap { report -> [Int64] in if case .started(let ids) = report { return ids } else { return [] } } == ids)
        #expect(ProcessingReport(line: "F 7") == .finished([7]))
        for junk in ["", "P", "P ", "X 1", "P1", "P x,y"] {
            #expect(ProcessingReport(line: Substring(junk)) == nil, "\(junk)")
        }
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
