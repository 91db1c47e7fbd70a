import Foundation
import Testing

@testable import HalcyonWorker

@Suite struct WorkerConfigurationTests {
    /// Containers sharing `--network host` all run their worker as pid 1 on the same host name:
    /// `<host>-<pid>` alone made them one worker in `locked_by` (each could finish the others' jobs).
    @Test func theDefaultWorkerIDIsUniquePerProcessStart() {
        let ids = Set((0..<50).map { _ in WorkerConfiguration.defaultWorkerID() })
        #expect(ids.count == 50)
        let prefix = "\(ProcessInfo.processInfo.hostName)-\(getpid())-"
        #expect(ids.allSatisfy { $0.hasPrefix(prefix) && $0.count > prefix.count })
    }

    /// Any text signs webhooks; one in Standard Webhooks' `whsec_<base64>` form must be base64.
    @Test func aWebhookSecretInTheWhsecFormMustBeBase64() {
        #expect(WebhookConfiguration.isValidSecret("any text at all"))
        #expect(WebhookConfiguration.isValidSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        #expect(WebhookConfiguration.isValidSecret("whsec_a2V5"), "unpadded base64")
        #expect(!WebhookConfiguration.isValidSecret("whsec_not base64!"))
        #expect(!WebhookConfiguration.isValidSecret("whsec_"))
    }

    @Test func heartbeatsHaveADeadlineShorterThanTheLease() {
        var configuration = WorkerConfiguration(storeRoot: URL(fileURLWithPath: "/tmp/x"))
        configuration.lease = .seconds(3)
        configuration.statementTimeout = .seconds(30)
        #expect(configuration.maintenanceStatementTimeout == .seconds(2))
        configuration.lease = .seconds(30)
        #expect(configuration.maintenanceStatementTimeout == .seconds(15))
        configuration.lease = .seconds(300)
        #expect(configuration.maintenanceStatementTimeout == .seconds(30))
    }
}
