import HalcyonRuntime
import ServiceLifecycle

/// The loop of a periodic duty (the store sweep, the usage roll-up, the queue metrics): `body`
/// runs every `interval` until a graceful shutdown, the first time after `first` — by default a
/// random 5–30 s (at most `interval`), so that a fleet started together does not all try at
/// once. `wake`, raised, runs `body` now instead of at the end of the wait. A shutdown while
/// `body` runs cancels the flag it was given; the run ends at its next check.
func runPeriodically(every interval: Duration, first: Duration? = nil, wake: WakeSignal? = nil, _ body: (CancellationFlag) async -> Void) async {
    var wait = first ?? min(interval, .seconds(Double.random(in: 5...30)))
    while !Task.isShuttingDownGracefully, !Task.isCancelled {
        if let wake {
            await withGracefulShutdownHandler { [wait] in
                await wake.wait(timeout: wait)
            } onGracefulShutdown: {
                wake.wake()
            }
        } else {
            try? await cancelWhenGracefulShutdown { [wait] in try await Task.sleep(for: wait) }
        }
        guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
        let cancel = CancellationFlag()
        await withGracefulShutdownHandler {
            await body(cancel)
        } onGracefulShutdown: {
            cancel.cancel()
        }
        wait = interval
    }
}
