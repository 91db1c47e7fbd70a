import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import Testing

@testable import HalcyonWorker

@Suite struct WorkerConfigurationTests {
    /// Containers sharing `--network host` all run their worker as pid 1 on the same host name:
    /// `<host>-<pid>` alone made them one worker in `locked_by` (each could finish the others' jobs).
    /// Misses are claimed at once while the slots would run dry, else several at a time; hits
    /// when half a hit claim is done.
    @Test func claimsWaitForSeveralFreePlacesOnlyWhileTheSlotsHaveWork() {
        // 3 slots and 8 downloads: 11 places.
        #expect(WorkerConfiguration.claimThreshold(hits: false, limit: 11, occupying: 0, concurrency: 3) == 1)
        #expect(WorkerConfiguration.claimThreshold(hits: false, limit: 11, occupying: 3, concurrency: 3) == 1)
        #expect(WorkerConfiguration.claimThreshold(hits: false, limit: 11, occupying: 4, concurrency: 3) == 4)
        #expect(WorkerConfiguration.claimThreshold(hits: false, limit: 11, occupying: 10, concurrency: 3) == 4)
        // One download place: every freed place is claimed (the fleet's fairness tests run so).
        #expect(WorkerConfiguration.claimThreshold(hits: false, limit: 3, occupying: 3, concurrency: 2) == 1)
        #expect(WorkerConfiguration.claimThreshold(hits: true, limit: 250, occupying: 200, concurrency: 3) == 125)
    }

    @Test func theDefaultWorkerIDIsUniquePerProcessStart() {
        let ids = Set((0..<50).map { _ in WorkerConfiguration.defaultWorkerID() })
        #expect(ids.count == 50)
        let prefix = "\(ProcessInfo.processInfo.hostName)-\(getpid())-"
        #expect(ids.allSatisfy { $0.hasPrefix(prefix) && $0.count > prefix.count })
    }

    /// Any text signs webhooks; one in Standard Webhooks' `whsec_<base64>` form must be base64;
    /// at most four secrets, each 1–1024 bytes.
    @Test func aWebhookSecretInTheWhsecFormMustBeBase64() {
        #expect(WebhookConfiguration.secretProblem("any text at all") == nil)
        #expect(WebhookConfiguration.secretProblem("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == nil)
        #expect(WebhookConfiguration.secretProblem("whsec_a2V5") == nil, "unpadded base64")
        #expect(WebhookConfiguration.secretProblem("whsec_not base64!") != nil)
        #expect(WebhookConfiguration.secretProblem("whsec_") != nil)
        #expect(WebhookConfiguration.secretProblem(String(repeating: "k", count: 1025)) != nil)
        var webhooks = WebhookConfiguration()
        webhooks.secrets = ["a", "b", "c", "d"]
        #expect(throws: Never.self) { try webhooks.validate() }
        webhooks.secrets.append("e")
        #expect(throws: HalcyonError.self) { try webhooks.validate() }
    }

    /// Help and messages are made from the values in force (each written once): a changed
    /// default, cap or range changes what `--help` and the errors say.
    @Test func helpAndMessagesStateTheValuesInForce() {
        let webhooks = WebhookConfiguration(), attempts = WebhookConfiguration.Settings.maxAttempts
        let durations = WorkerConfiguration.Settings.retryBase.format
        #expect(
            attempts.help.contains("back off from \(durations(webhooks.retryBase)), doubling, to \(durations(webhooks.maxRetryDelay))"),
            "\(attempts.help)")
        var worker = WorkerConfiguration(storeRoot: URL(fileURLWithPath: "/nonexistent"))
        #expect(WorkerConfiguration.Settings.retryBase.defaultValue == worker.backoff.base)
        #expect(WorkerConfiguration.Settings.retryBase.help.contains("capped at \(worker.backoff.maximum.map(durations) ?? "none")"))
        let slots = WorkerConfiguration.Settings.queueSlots
        worker.queues = [QueueSlots(name: "backfill", slots: slots.upperBound + 1)]
        #expect(message { try worker.validate() }?.contains("from \(slots.lowerBound) to \(slots.upperBound)") == true)
        let bytes = WebhookConfiguration.secretBytes
        let tooLong = WebhookConfiguration.secretProblem(String(repeating: "k", count: bytes.upperBound + 1))
        #expect(tooLong?.contains("\(bytes.lowerBound) to \(bytes.upperBound) bytes") == true, "\(tooLong ?? "")")
        var supervisor = SupervisorConfiguration(workerID: "w", arguments: [])
        #expect(supervisor.maxJobTime == ImageLimits().maxJobTime && supervisor.grace == WorkerConfiguration.Settings.grace.defaultValue)
        let poison = SupervisorConfiguration.poisonAfterRange
        supervisor.poisonAfter = poison.upperBound + 1
        #expect(message { try supervisor.validate() }?.contains("\(poison.lowerBound)–\(poison.upperBound)") == true)
    }

    /// The message `body` throws, nil when it does not.
    private func message(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return (error as? HalcyonError)?.message ?? "\(error)"
        }
    }

    /// The signature header carries one `v1,` signature per secret, the first secret's first.
    @Test func everySecretSignsAndTheFirstSignsTheLegacyHeader() throws {
        let one = try #require(WebhookSignature(secrets: ["new"]))
        let two = try #require(WebhookSignature(secrets: ["new", "whsec_b2xk"]))
        let body = Data("{}".utf8)
        let a = one.headers(messageID: "job_1_x", timestamp: 1_700_000_000, body: body)
        let b = two.headers(messageID: "job_1_x", timestamp: 1_700_000_000, body: body)
        let parts = try #require(b["webhook-signature"]).split(separator: " ").map(String.init)
        #expect(parts.count == 2 && parts.allSatisfy { $0.hasPrefix("v1,") })
        #expect(parts.first == a["webhook-signature"])
        #expect(a[WebhookSignature.legacyHeader] == b[WebhookSignature.legacyHeader])
        #expect(WebhookSignature(secrets: []) == nil)
    }

    /// Retry-After lengthens a retry's wait, never shortens it, and is capped.
    @Test func retryAfterIsHonouredWithinBounds() {
        let webhooks = WebhookConfiguration()
        #expect(webhooks.retryDelay(afterAttempt: 1) == .seconds(1))
        #expect(webhooks.retryDelay(afterAttempt: 1, retryAfter: 3) == .seconds(3))
        #expect(webhooks.retryDelay(afterAttempt: 4, retryAfter: 3) == .seconds(8), "the backoff is longer")
        #expect(webhooks.retryDelay(afterAttempt: 1, retryAfter: 1e9) == .seconds(300), "capped at maxRetryDelay")
        #expect(webhooks.retryDelay(afterAttempt: 1, retryAfter: -5) == .seconds(1))
        #expect(webhooks.retryDelay(afterAttempt: 1, retryAfter: .nan) == .seconds(1))
    }

    /// A host's circuit: closed until `breakerThreshold` failures in a row; open (deliveries
    /// refused for the cooldown); then one probe at a time; a failed probe doubles the cooldown,
    /// an answer closes it. An answer before the threshold resets the count.
    @Test func aHostsCircuitOpensProbesAndCloses() {
        var webhooks = WebhookConfiguration()
        webhooks.breakerThreshold = 3
        webhooks.breakerCooldown = .seconds(10)
        webhooks.perHostConcurrency = 1
        let gate = WebhookDeliverer.HostGate(configuration: webhooks)
        let t0 = ContinuousClock.now
        func fail(_ at: ContinuousClock.Instant) -> Duration? {
            #expect(gate.admit("h", now: at) == .go)
            return gate.end("h", .failed, now: at)
        }
        #expect(fail(t0) == nil)
        #expect(gate.admit("h", now: t0) == .go)
        #expect(gate.admit("h", now: t0) == .busy, "one in flight per host here")
        #expect(gate.end("h", .answered, now: t0) == nil)
        #expect(fail(t0) == nil)
        #expect(fail(t0) == nil)
        #expect(fail(t0) == .seconds(10), "the third failure in a row opens it")
        #expect(gate.admit("h", now: t0 + .seconds(4)) == .open(.seconds(6)))
        #expect(gate.admit("other", now: t0 + .seconds(4)) == .go, "other hosts go on")
        _ = gate.end("other", .answered)
        let probe = t0 + .seconds(11)
        #expect(gate.admit("h", now: probe) == .go, "after the cooldown, one probe")
        #expect(gate.admit("h", now: probe) == .busy)
        #expect(gate.end("h", .failed, now: probe) == .seconds(20), "a failed probe doubles the cooldown")
        #expect(gate.admit("h", now: probe + .seconds(19)) == .open(.seconds(1)))
        let second = probe + .seconds(21)
        #expect(gate.admit("h", now: second) == .go)
        #expect(gate.end("h", .neutral, now: second) == nil, "a stopped probe says nothing")
        #expect(gate.admit("h", now: second) == .go, "and another may probe")
        #expect(gate.end("h", .answered, now: second) == nil)
        #expect(gate.admit("h", now: second) == .go, "closed again")
        #expect(gate.inFlight == 1)
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
