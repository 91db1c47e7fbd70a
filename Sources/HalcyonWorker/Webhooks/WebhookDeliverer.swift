import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonQueue
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
struct WebhookDeliverer: Service {
    let configuration: WorkerConfiguration
    let conninfo: String
    let wake: WakeSignal
    /// Whether the worker was asked to stop (a signal, not the end of a drain).
    let stopRequested: @Sendable () -> Bool
    let logger: Logger

    /// The header carrying `sha256=<hex HMAC-SHA256 of the body>`.
    static let signatureHeader = "X-Halcyon-Signature"

    func run() async {
        // `cancel` ends deliveries in flight; `finishing` makes a drained worker stop once
        // nothing is left to deliver soon.
        let cancel = CancellationFlag(), finishing = CancellationFlag()
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
        fetch.connectTimeout = min(fetch.connectTimeout, webhooks.timeout.seconds)
        fetch.totalTimeout = webhooks.timeout.seconds
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
        // The key is derived once (a `whsec_` secret is base64), not per delivery.
        let signature = webhooks.secret.flatMap(WebhookSignature.init(secret:))
        if signature == nil {
            logger.debug("no webhook secret: deliveries are not signed")
        }
        // Deliveries run side by side, up to `concurrency`, and at most `perHostConcurrency` to one
        // host: as each ends another is taken, so one slow receiver holds one slot (or a host's
        // few), never the pipeline. A delivery taken for a host already at its limit is put back
        // at once, its attempt not spent, due again a moment later.
        let flight = InFlight()
        await withDiscardingTaskGroup { group in
            while !cancel.isCancelled {
                if finishing.isCancelled && stopRequested() {
                    cancel.cancel()
                    break
                }
                let free = webhooks.concurrency - flight.count
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
                var putBack: [JobQueue.Callback] = []
                for callback in taken {
                    let host = Self.hostKey(callback.url)
                    guard flight.start(host: host, limit: webhooks.perHostConcurrency) else {
                        putBack.append(callback)
                        continue
                    }
                    group.addTask {
                        await deliver(callback, http: http, signature: signature, queue: queue, cancel: cancel)
                        flight.end(host: host)
                        wake.wake()
                    }
                }
                for callback in putBack {
                    _ = try? await queue.putBack(callback, dueIn: Self.hostBusyDelay)
                }
                if taken.isEmpty && flight.count == 0 && finishing.isCancelled {
                    let soon = try? await queue.callbackDue(within: configuration.grace)
                    if soon != true {
                        logger.info("drained: no webhook delivery is due")
                        break
                    }
                }
                // Until a delivery ends, another becomes due (a NOTIFY-free wake from the
                // recorder), or the poll interval passes.
                if taken.isEmpty || flight.count >= webhooks.concurrency || !putBack.isEmpty {
                    await wake.wait(timeout: max(configuration.pollInterval, .milliseconds(200)))
                }
            }
        }
    }

    /// How long a delivery put back for a busy host waits before it is due again.
    static let hostBusyDelay: Duration = .milliseconds(500)

    /// The host a delivery goes to, for the per-host limit (lowercased; the URL if it has none).
    static func hostKey(_ url: String) -> String { URL(string: url)?.host?.lowercased() ?? url }

    /// Deliveries in flight, in all and per host.
    final class InFlight: Sendable {
        private let state = Mutex<(count: Int, hosts: [String: Int])>((0, [:]))

        var count: Int { state.withLock { $0.count } }

        /// Counts one more to `host` unless it has `limit` already.
        func start(host: String, limit: Int) -> Bool {
            state.withLock { s in
                guard s.hosts[host, default: 0] < limit else { return false }
                s.hosts[host, default: 0] += 1
                s.count += 1
                return true
            }
        }

        func end(host: String) {
            state.withLock { s in
                s.count -= 1
                s.hosts[host, default: 1] -= 1
                if s.hosts[host] == 0 { s.hosts[host] = nil }
            }
        }
    }

    private func deliver(
        _ callback: JobQueue.Callback, http: HTTPClient, signature: WebhookSignature?, queue: JobQueue, cancel: CancellationFlag
    ) async {
        let webhooks = configuration.webhooks
        let started = ContinuousClock.now
        let outcome: JobQueue.CallbackOutcome
        do {
            try await post(callback, http: http, signature: signature, cancel: cancel)
            outcome = .delivered
        } catch {
            if cancel.isCancelled && error.code == .cancelled {
                // Stopped mid-delivery: try again soon, from whichever worker is running. (A
                // delivery that failed for a reason of its own is recorded as that.)
                outcome = .retry(after: .zero, error: "\(ErrorCode.cancelled): the worker stopped during the delivery")
            } else if error.permanent || callback.attempt >= webhooks.maxAttempts {
                outcome = .failed(error: "\(error.code): \(error.message)")
            } else {
                outcome = .retry(after: webhooks.retryDelay(afterAttempt: callback.attempt), error: "\(error.code): \(error.message)")
            }
        }
        var meta: Logger.Metadata = [
            "job": "\(callback.jobID)", "attempt": "\(callback.attempt)", "took": "\(TimeSpan.format(ContinuousClock.now - started))",
        ]
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
            logger.warning("could not record a webhook delivery", metadata: ["job": "\(callback.jobID)", "error": "\(error)"])
        }
    }

    /// One POST; throws the categorized error of a failed delivery (a 3xx is not followed and
    /// counts as a permanent `fetch.http_status`).
    private func post(
        _ callback: JobQueue.Callback, http: HTTPClient, signature: WebhookSignature?, cancel: CancellationFlag
    ) async throws(HalcyonError) {
        guard let url = URL(string: callback.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil
        else {
            throw HalcyonError(.invalidOptions, "callback_url is not an http(s) URL", source: callback.url)
        }
        let body = Data(callback.body.utf8)
        let timestamp = Int(Date().timeIntervalSince1970)
        var headers = [
            "Content-Type": "application/json", "X-Halcyon-Job": "\(callback.jobID)", "X-Halcyon-Delivery-Attempt": "\(callback.attempt)",
            "webhook-id": callback.messageID, "webhook-timestamp": "\(timestamp)",
        ]
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
