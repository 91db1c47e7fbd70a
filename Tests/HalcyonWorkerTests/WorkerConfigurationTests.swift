import Foundation
@testable import HalcyonWorker
import Testing

@Suite struct WorkerConfigurationTests {
    /// Containers sharing `--network host` all run their worker as pid 1 on the same host name:
    /// `<host>-<pid>` alone made them one worker in `locked_by` (each could finish the others' jobs).
    @Test func theDefaultWorkerIDIsUniquePerProcessStart() {
        let ids = Set((0..<50).map { _ in WorkerConfiguration.defaultWorkerID() })
        #expect(ids.count == 50)
        let prefix = "\(ProcessInfo.processInfo.hostName)-\(getpid())-"
        #expect(ids.allSatisfy { $0.hasPrefix(prefix) && $0.count > prefix.count })
    }

    @Test func heartbeatsHaveADeadlineShorterThanTheLease() {
        var c = WorkerConfiguration(storeRoot: URL(fileURLWithPath: "/tmp/x"))
        c.lease = 3
        c.statementTimeout = 30
        #expect(c.maintenanceStatementTimeout == 2)
        c.lease = 30
        #expect(c.maintenanceStatementTimeout == 15)
        c.lease = 300
        #expect(c.maintenanceStatementTimeout == 30)
    }
}
