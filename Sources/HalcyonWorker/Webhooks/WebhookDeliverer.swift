import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonQueue
import HalcyonStore
import Logging
import ServiceLifecycle

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
        if webhooks.secret == nil {
            logger.debug("no webhook secret: deliveries are not signed")
        }
        while !cancel.isCancelled {
            if finishing.isCancelled && stopRequested() {
                cancel.cancel()
                break
            }
            let taken: [JobQueue.Callback]
            do {
                taken = try await DatabaseRetry().run("take webhook deliveries", logger: logger, giveUpWhen: stopping) {
                    try await queue.takeCallbacks(limit: webhooks.concurrency, hold: hold)
                }
            } catch {
                if !cancel.isCancelled { logger.error("cannot take webhook deliveries", metadata: ["error": "\(error)"]) }
                await wake.wait(timeout: configuration.pollInterval)
                continue
            }
            if taken.isEmpty {
                if finishing.isCancelled {
                    let soon = try? await queue.callbackDue(within: configuration.grace)
                    if soon != true {
                        logger.info("drained: no webhook delivery is due")
                        break
                    }
                }
                await wake.wait(timeout: max(configuration.pollInterval, .milliseconds(200)))
                continue
            }
            await withTaskGroup(of: Bool.self) { group in
                for callback in taken {
                    group.addTask {
                        await deliver(callback, http: http, queue: queue, cancel: cancel)
                        return true
                    }
                }
                // While a drained worker finishes its deliveries, a stop request ends them.
                group.addTask { [stopRequested] in
                    while !Task.isCancelled {
                        if finishing.isCancelled && stopRequested() {
                            cancel.cancel()
                            break
                        }
                        try? await Task.sleep(for: .milliseconds(200))
                    }
                    return false
                }
                var delivered = 0
                for await finished in group where finished {
                    delivered += 1
                    if delivered == taken.count { group.cancelAll() }
                }
            }
        }
    }

    private func deliver(_ callback: JobQueue.Callback, http: HTTPClient, queue: JobQueue, cancel: CancellationFlag) async {
        let webhooks = configuration.webhooks
        let started = ContinuousClock.now
        let outcome: JobQueue.CallbackOutcome
        do {
            try await post(callback, http: http, cancel: cancel)
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
    private func post(_ callback: JobQueue.Callback, http: HTTPClient, cancel: CancellationFlag) async throws(HalcyonError) {
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
        if let signature = configuration.webhooks.secret.flatMap(WebhookSignature.init(secret:)) {
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
