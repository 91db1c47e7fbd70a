import Foundation
import HalcyonRuntime
import Testing

/// A deadline flag (`CancellationFlag.deadline`): raised by the first look past its deadline,
/// with the deadline's reason, and by its parent — with no timer behind it, so that a job that
/// ends early leaves nothing scheduled.
@Suite struct CancellationDeadlineTests {
    struct Overrun: Error, Equatable {}

    @Test func theFirstLookPastTheDeadlineRaisesItWithItsReason() async throws {
        let flag = CancellationFlag.deadline(.now + .milliseconds(50), because: Overrun())
        let ran = Counter()
        flag.onCancel { ran.add() }
        #expect(!flag.isCancelled && flag.reason == nil)
        try await Task.sleep(for: .milliseconds(80))
        // Nothing fired by itself: the handler runs at the first look.
        #expect(ran.value == 0)
        #expect(flag.isCancelled)
        #expect(flag.reason as? Overrun == Overrun())
        #expect(ran.value == 1)
        _ = flag.isCancelled
        #expect(ran.value == 1)
    }

    @Test func theParentRaisesItFirstWithItsOwnReason() {
        let parent = CancellationFlag()
        let flag = CancellationFlag.deadline(.now + .seconds(3600), because: Overrun(), parent: parent)
        #expect(!flag.isCancelled)
        parent.cancel()
        #expect(flag.isCancelled && flag.reason == nil)
        // A flag raised already stays as it was raised, past its deadline too.
        let early = CancellationFlag.deadline(.now, because: Overrun())
        early.cancel()
        #expect(early.isCancelled && early.reason == nil)
    }

    /// What a pipeline's phases leave behind once the job is done: nothing but their handler on
    /// the job's own flag, which goes with it.
    @Test func aFlagPastItsUseHoldsNothing() {
        weak var gone: CancellationFlag?
        let parent = CancellationFlag()
        do {
            let flag = CancellationFlag.deadline(.now + .seconds(3600), because: Overrun(), parent: parent)
            gone = flag
            #expect(!flag.isCancelled)
        }
        #expect(gone == nil)
        #expect(parent.handlerCount == 1)
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        var value: Int { lock.withLock { n } }
        func add() { lock.withLock { n += 1 } }
    }
}
