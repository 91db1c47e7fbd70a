import Foundation
import HalcyonTestSupport
import HalcyonWorker
import Logging
import Testing

/// The supervisor sees its child's exit when the child's report pipe ends, not at its next
/// periodic look: a drained worker's process exits as soon as its child has.
///
/// It runs alone among the tests that start processes: the supervisor makes its pipe
/// close-on-exec just after making it (it starts nothing else meanwhile), and a process another
/// test started in that moment would hold the pipe open — and delay its end — until it exits.
@Suite(.processes(64))
struct SupervisorWatchTests {
    @Test func aChildsExitIsSeenWhenItsPipeEndsNotAtTheNextLook() async {
        // A child that exits by itself (its status is the supervisor's), and looks 30 s apart.
        var configuration = SupervisorConfiguration(workerID: "watch-test", arguments: ["-c", "sleep 0.3; exit 7"])
        configuration.executable = "/bin/sh"
        configuration.watchInterval = .seconds(30)
        let supervisor = Supervisor(configuration: configuration, conninfo: "", logger: Logger(label: "supervisor-watch-test"))
        let started = ContinuousClock.now
        let status = await supervisor.run()
        let took = ContinuousClock.now - started
        #expect(status == 7)
        // The child lives 0.3 s; without the pipe's end the exit would be seen 30 s after start.
        #expect(took < .seconds(10), "the exit was seen after \(took)")
    }
}
