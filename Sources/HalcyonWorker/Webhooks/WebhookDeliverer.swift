import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import Logging
import ServiceLifecycle
import Synchronization

/// Delivers webhooks (`options.callback_url`) as a service of its own, on its own connection:
/// takes due deliveries from the rows (`JobQueue.takeCallbacks`), POSTs each job's JSON with
/// its signature through the downloads' address policy, and records the outcome on the row.
/// A failed delivery never touches the job's state. A delivery is retried with backoff on
/// 5xx, 408, 429, timeouts and connection errors; given up on any other 4xx, a refused
/// address, or after `maxAttempts`. Deliveries live on the rows, so whatever a worker did not
/// finish (stopped, crashed) another worker takes once its hold runs out.
///
/// A worker stopping (a signal) ends its deliveries in flight at once; they are due again at
/// once, for any worker. A worker that drained (`--drain`) instead finishes them, and goes on
/// delivering until no delivery is due now or due for a retry within `--grace` — a stop request
/// meanwhile ends that too.
///
/// `halcyon deliver` runs one alone (`init(deliveringOnly:…)`): it delivers any job's webhooks,
/// claims no job, and with `--drain` exits as a drained worker would.
public struct WebhookDeliverer: Service, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    public var description: String { "WebhookDeliverer" }

    /// What a deliverer needs of its worker's configuration.
    public struct Settings: Sendable {
        public var webhooks: WebhookConfiguration
        /// Connection limits and the address policy (the SSRF guard) deliveries go through.
        public var fetch: FetchConfiguration
        /// Finish once no delivery is due now or due for a retry within `grace`.
        public var drain: Bool
        public var grace: Duration
        /// How often to look for due deliveries when nothing wakes the deliverer.
        public var pollInterval: Duration
        public var statementTimeout: Duration

        public init(
            webhooks: WebhookConfiguration, fetch: FetchConfiguration = FetchConfiguration(), drain: Bool = false,
            grace: Duration = WorkerConfiguration.Settings.grace.defaultValue,
            pollInterval: Duration = WorkerConfiguration.Settings.pollInterval.defaultValue,
            statementTimeout: Duration = WorkerConfiguration.Settings.statementTimeout.defaultValue
        ) {
            self.webhooks = webhooks
            self.fetch = fetch
            self.drain = drain
            self.grace = grace
            self.pollInterval = pollInterval
            self.statementTimeout = statementTimeout
        }

        init(_ worker: WorkerConfiguration) {
            self.init(
                webhooks: worker.webhooks, fetch: worker.fetch, drain: worker.drain, grace: worker.grace, pollInterval: worker.pollInterval,
                statementTimeout: worker.statementTimeout)
        }
    }

    let configuration: Settings
    let conninfo: String
    let wake: WakeSignal
    /// Whether the worker was asked to stop (a signal, not the end of a drain).
    let stopRequested: @Sendable () -> Bool
    /// Exports a `webhook` span of each delivery of a traced job; nil with tracing off.
    var tracer: JobTracer? = nil
    let logger: Logger
    /// Delivering only, with `drain`: finish as soon as nothing is due, not at a shutdown.
    var drainsFromStart = false

    init(
        worker configuration: WorkerConfiguration, conninfo: String, wake: WakeSignal, stopRequested: @escaping @Sendable () -> Bool,
        tracer: JobTracer? = nil, logger: Logger
    ) {
        self.tracer = tracer
        self.configuration = Settings(configuration)
        self.conninfo = conninfo
        self.wake = wake
        self.stopRequested = stopRequested
        self.logger = logger
    }

    /// A deliverer with no worker around it: it polls for due deliveries every
    /// `settings.pollInterval`. With `settings.drain` it returns once no delivery is due now or
    /// due for a retry within `settings.grace`; otherwise it runs until a graceful shutdown.
    /// `stopRequested` says a stop was asked for (a signal): deliveries in flight then end at
    /// once, and are due again for any worker.
    public init(deliveringOnly settings: Settings, conninfo: String, stopRequested: @escaping @Sendable () -> Bool, logger: Logger) {
        configuration = settings
        self.conninfo = conninfo
        wake = WakeSignal()
        self.stopRequested = stopRequested
        self.logger = logger
        drainsFromStart = settings.drain
    }

    public func run() async {
        // `cancel` ends deliveries in flight; `finishing` makes a drained worker stop once
        // nothing is left to deliver soon.
        let cancel = CancellationFlag(), finishing = CancellationFlag()
        if drainsFromStart { finishing.cancel() }
        await withGracefulShutdownHandler {
            await deliverUntilShutdown(cancel: cancel, finishing: finishing)
        } onGracefulShutdown: { [configuration, stopRequested] in
            if configuration.drain && !stopRequested() { finishing.cancel() } else { cancel.cancel() }
            wake.wake()
        }
    }

    /// How long a taken delivery is this worker's before another may take it again.
    private var hold: Duration { configuration.webhooks.timeout + .seconds(30) }

    private func deliverUntilShutdown(cancel: CancellationFlag, finishing: CancellationFlag) async {
        let webhooks = configuration.webhooks
        var fetch = configuration.fetch
        fetch.connectTimeout = min(fetch.connectTimeout, webhooks.timeout)
        fetch.totalTimeout = webhooks.timeout
        let http = HTTPClient(configuration: fetch)
        let stopping = { cancel.isCancelled }
        guard
            let connection = try? await DatabaseRetry().run(
                "connect (webhooks)", logger: logger, giveUpWhen: stopping,
                { [conninfo] in
                    try await PGConnection.connect(conninfo, label: "webhooks", statementTimeout: configuration.statementTimeout.seconds)
                })
        else { return }
        defer { Task { await connection.close() } }
        let queue = JobQueue(connection: connection)
        // The keys are derived once (a `whsec_` secret is base64), not per delivery.
        let signature = WebhookSignature(secrets: webhooks.secrets)
        if signature == nil {
            logger.debug("no webhook secret: deliveries are not signed")
        }
        // Deliveries run side by side, up to `concurrency`, and at most `perHostConcurrency` to one
        // host: as each ends another is taken, so one slow receiver holds one slot (or a host's
        // few), never the pipeline. A delivery taken for a host already at its limit is put back
        // at once, its attempt not spent, due again a moment later.
        let hosts = HostGate(configuration: webhooks)
        await withDiscardingTaskGroup { group in
            while !cancel.isCancelled {
                if finishing.isCancelled && stopRequested() {
                    cancel.cancel()
                    break
                }
                let free = webhooks.concurrency - hosts.inFlight
                var taken: [JobQueue.Callback] = []
                if free > 0 {
                    do {
                        taken = try await DatabaseRetry().run("take webhook deliveries", logger: logger, giveUpWhen: stopping) {
                            try await queue.takeCallbacks(limit: free, hold: hold)
                        }
                    } catch {
                        if !cancel.isCancelled { logger.error("cannot take webhook deliveries", metadata: ["error": "\(error)"]) }
                        await wake.wait(timeout: configuration.pollInterval)
                        continue
                    }
                }
                var putBack: [(callback: JobQueue.Callback, dueIn: Duration)] = []
                for callback in taken {
                    let host = Self.hostKey(callback.url)
                    switch hosts.admit(host) {
                    case .busy:
                        putBack.append((callback, Self.hostBusyDelay))
                        continue
                    case .open(let remaining):
                        putBack.append((callback, max(remaining, Self.hostBusyDelay)))
                        continue
                    case .go:
                        break
                    }
                    group.addTask {
                        let verdict = await deliver(callback, http: http, signature: signature, queue: queue, cancel: cancel)
                        if let opened = hosts.end(host, verdict) {
                            logger.warning(
                                "webhook receiver keeps failing: its deliveries wait (circuit open)",
                                metadata: ["host": "\(host)", "for": "\(TimeSpan.format(opened))"])
                        }
                        wake.wake()
                    }
                }
                for (callback, dueIn) in putBack {
                    _ = try? await queue.putBack(callback, dueIn: dueIn)
                }
                if taken.isEmpty && hosts.inFlight == 0 && finishing.isCancelled {
                    let soon = try? await queue.callbackDue(within: configuration.grace)
                    if soon != true {
                        logger.info("drained: no webhook delivery is due")
                        break
                    }
                }
                // Until a delivery ends, another becomes due (a NOTIFY-free wake from the
                // recorder), or the poll interval passes.
                if taken.isEmpty || hosts.inFlight >= webhooks.concurrency || !putBack.isEmpty {
                    await wake.wait(timeout: max(configuration.pollInterval, .milliseconds(200)))
                }
            }
        }
    }

    /// How long a delivery put back for a busy host waits before it is due again.
    static let hostBusyDelay: Duration = .milliseconds(500)

    /// The host a delivery goes to, for the per-host limit (lowercased; the URL if it has none).
    static func hostKey(_ url: String) -> String { URL(string: url)?.host?.lowercased() ?? url }

    /// Deliveries in flight, in all and per host, and each host's circuit breaker: after
    /// `breakerThreshold` failed attempts in a row (the receiver unreachable, slow or answering
    /// 5xx/408/429) a host's circuit opens — its deliveries are put back, attempts not spent,
    /// until `breakerCooldown` has passed; then one delivery probes it: a success closes the
    /// circuit, a failure opens it again for twice as long (up to `maxRetryDelay`).
    final class HostGate: Sendable {
        private struct Host {
            var inFlight = 0
            var failures = 0
            var openUntil: ContinuousClock.Instant?
            /// Times the circuit opened since the host last answered: its cooldown doubles with them.
            var openings = 0
            var probing = false
        }
        private let state = Mutex<(inFlight: Int, hosts: [String: Host])>((0, [:]))
        private let configuration: WebhookConfiguration
        /// Hosts remembered at most (beyond it, idle hosts with closed or expired circuits are forgotten).
        static let maxHosts = 4096

        /// `breakerCooldown` at the first opening, doubling at each failed probe, up to `maxRetryDelay`.
        let cooldowns: Backoff

        init(configuration: WebhookConfiguration) {
            self.configuration = configuration
            cooldowns = Backoff(doubling: configuration.breakerCooldown, upTo: configuration.maxRetryDelay)
        }

        enum Admission: Equatable {
            case go
            /// At its limit of deliveries in flight, or being probed.
            case busy
            /// Its circuit is open for this much longer.
            case open(Duration)
        }

        /// How a delivery went, for the breaker.
        enum Verdict {
            /// Delivered, or the receiver answered (a refusal is the receiver's, not an outage).
            case answered
            /// No answer worth having: a timeout, a connection error, 5xx, 408, 429.
            case failed
            /// Says nothing of the receiver (stopped, refused address, bad URL).
            case neutral
        }

        var inFlight: Int { state.withLock { $0.inFlight } }

        /// Counts one more delivery to `host`, or says why not.
        func admit(_ host: String, now: ContinuousClock.Instant = .now) -> Admission {
            state.withLock { s in
                var h = s.hosts[host] ?? Host()
                if let until = h.openUntil {
                    if now < until { return .open(until - now) }
                    if h.probing { return .busy }
                    h.probing = true
                }
                guard h.inFlight < configuration.perHostConcurrency else { return .busy }
                h.inFlight += 1
                s.inFlight += 1
                s.hosts[host] = h
                return .go
            }
        }

        /// Ends one delivery to `host`; returns how long its circuit now stays open when this
        /// ending opened (or reopened) it.
        func end(_ host: String, _ verdict: Verdict, now: ContinuousClock.Instant = .now) -> Duration? {
            state.withLock { s in
                s.inFlight -= 1
                guard var h = s.hosts[host] else { return nil }
                h.inFlight -= 1
                var opened: Duration?
                switch verdict {
                case .answered:
                    h = Host(inFlight: h.inFlight)
                case .failed:
                    h.failures += 1
                    if h.probing {
                        h.probing = false
                        h.openings += 1
                        let cooldown = cooldowns.delay(afterAttempt: h.openings)
                        h.openUntil = now + cooldown
                        opened = cooldown
                    } else if h.openUntil == nil && h.failures >= configuration.breakerThreshold {
                        h.openings = 1
                        let cooldown = cooldowns.delay(afterAttempt: 1)
                        h.openUntil = now + cooldown
                        opened = cooldown
                    }
                case .neutral:
                    h.probing = false
                }
                if h.inFlight == 0 && h.failures == 0 && h.openUntil == nil {
                    s.hosts[host] = nil
                } else {
                    s.hosts[host] = h
                }
                if s.hosts.count > Self.maxHosts {
                    s.hosts = s.hosts.filter { $0.value.inFlight > 0 || ($0.value.openUntil.map { now < $0 } ?? false) }
                }
                return opened
            }
        }
    }

    /// Makes one attempt and records it; says how it went, for the host's circuit breaker.
    private func deliver(
        _ callback: JobQueue.Callback, http: HTTPClient, signature: WebhookSignature?, queue: JobQueue, cancel: CancellationFlag
    ) async -> HostGate.Verdict {
        let webhooks = configuration.webhooks
        let started = ContinuousClock.now
        let outcome: JobQueue.CallbackOutcome
        let verdict: HostGate.Verdict
        // A traced job's delivery is a span of its trace, and the receiver's trace its child.
        let span = tracer?.webhookSpan(callback)
        var failure: HalcyonError?
        defer { if let span { tracer?.finish(span, callback, error: failure) } }
        do {
            try await post(callback, http: http, signature: signature, traceparent: span?.traceparent, cancel: cancel)
            outcome = .delivered
            verdict = .answered
        } catch {
            failure = error
            if cancel.isCancelled && error.code == .cancelled {
                // Stopped mid-delivery: try again soon, from whichever worker is running. (A
                // delivery that failed for a reason of its own is recorded as that.)
                outcome = .retry(after: .zero, error: "\(ErrorCode.cancelled): the worker stopped during the delivery")
                verdict = .neutral
            } else {
                if error.permanent || callback.attempt >= webhooks.maxAttempts {
                    outcome = .failed(error: "\(error.code): \(error.message)")
                } else {
                    let delay = webhooks.retryDelay(afterAttempt: callback.attempt, retryAfter: error.retryAfter)
                    outcome = .retry(after: delay, error: "\(error.code): \(error.message)")
                }
                verdict = Self.verdict(error)
            }
        }
        var meta: Logger.Metadata = [
            "job": "\(callback.jobID)", "attempt": "\(callback.attempt)", "took": "\(TimeSpan.format(ContinuousClock.now - started))",
        ]
        if let traceID = callback.traceID { meta["trace_id"] = "\(traceID)" }
        switch outcome {
        case .delivered: logger.debug("webhook delivered", metadata: meta)
        case .retry(let after, let error):
            meta["error"] = "\(error)"
            meta["retry_in"] = "\(TimeSpan.format(after))"
            logger.info("webhook delivery failed; will retry", metadata: meta)
        case .failed(let error):
            meta["error"] = "\(error)"
            logger.warning("webhook delivery failed for good", metadata: meta)
        }
        do {
            _ = try await DatabaseRetry().run("record a webhook delivery", logger: logger, giveUpWhen: { cancel.isCancelled }) {
                try await queue.record(callback, outcome)
            }
        } catch {
            // Not recorded: the delivery stays pending and is taken again after its hold.
            var meta: Logger.Metadata = ["job": "\(callback.jobID)", "error": "\(error)"]
            if let traceID = callback.traceID { meta["trace_id"] = "\(traceID)" }
            logger.warning("could not record a webhook delivery", metadata: meta)
        }
        return verdict
    }

    /// What a failed attempt says of its host: a refusal the receiver sent (any status but
    /// 5xx, 408, 429) means it is up; a refused address or a bad URL says nothing.
    static func verdict(_ error: HalcyonError) -> HostGate.Verdict {
        switch error.code {
        case .blockedAddress, .invalidOptions, .cancelled: return .neutral
        default: return error.permanent ? .answered : .failed
        }
    }

    /// One POST; throws the categorized error of a failed delivery (a 3xx is not followed and
    /// counts as a permanent `fetch.http_status`).
    private func post(
        _ callback: JobQueue.Callback, http: HTTPClient, signature: WebhookSignature?, traceparent: String?, cancel: CancellationFlag
    ) async throws(HalcyonError) {
        guard let url = URL(string: callback.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil
        else {
            throw HalcyonError(.invalidOptions, "callback_url is not an http(s) URL", source: callback.url)
        }
        let body = Data(callback.body.utf8)
        guard body.count <= JobQueue.maxCallbackBodyBytes else {
            throw HalcyonError(
                .invalidOptions, "the webhook body would be \(body.count) bytes, over the \(JobQueue.maxCallbackBodyBytes >> 10) KiB cap",
                permanent: true, source: callback.url)
        }
        let timestamp = Int(Date().timeIntervalSince1970)
        var headers = [
            "Content-Type": "application/json", "X-Halcyon-Job": "\(callback.jobID)", "X-Halcyon-Delivery-Attempt": "\(callback.attempt)",
            "webhook-id": callback.messageID, "webhook-timestamp": "\(timestamp)",
        ].merging(callback.traceHeaders) { a, _ in a }
        if let traceparent { headers["traceparent"] = traceparent }
        if let signature {
            headers.merge(signature.headers(messageID: callback.messageID, timestamp: timestamp, body: body)) { $1 }
        }
        let response: HTTPResponse
        do {
            response = try await Blocking.run { [headers] in try http.post(url, body: body, headers: headers, cancel: cancel) }
        } catch {
            throw HalcyonError.wrap(error)
        }
        guard (200..<300).contains(response.status) else {
            throw HalcyonError(
                .httpStatus, "HTTP \(response.status) from \(url.host ?? callback.url) (redirects are not followed)", source: callback.url)
        }
    }
}
