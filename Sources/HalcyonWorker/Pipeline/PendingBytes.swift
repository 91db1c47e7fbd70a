import Dispatch
import HalcyonDomain
import HalcyonFetch
import HalcyonRuntime
import Synchronization

/// The bytes of sources a worker holds in memory — arriving (counted chunk by chunk as they
/// are received) and downloaded, waiting for or in a processing slot — kept under a budget.
/// Without it, a worker that claimed many jobs (store-hit claims of 250, or many big sources)
/// would download them all at once, and the memory over `--max-memory` would be spent before
/// any job's decode.
///
/// - A transfer starts (in its download slot) only while fewer than `limit` bytes count, and a
///   transfer under way is held back at its next chunk while more do — except the privileged
///   one, which always goes on, so the bytes that fill the budget are on their way to being
///   processed and given back.
/// - Each transfer is judged on its speed over `window`s of the time it runs (time held back
///   here does not count): it is *moving* while it receives at least `movingRate` bytes a
///   second. The privilege belongs to a moving transfer — the oldest one when it falls free —
///   and a privileged transfer that stops moving gives it up to the oldest one that moves.
/// - The bytes of transfers that are not moving are *parked*: up to `parkedAllowance` (as much
///   as the budget) of them count against no one, so an origin that sent a lot and then drips
///   does not keep the budget from the transfers that move. Past the allowance they count
///   again, and the privilege stays where it is while it does (a slow transfer that holds it
///   keeps it until it ends or the parked bytes fit), so handing it on never adds to what is
///   held beyond the allowance.
///
/// The most held is about twice `limit` (the budget and the parked allowance), plus the body of
/// the privileged transfer and a chunk per other transfer. When nothing moves, the oldest
/// transfer goes on, as before. Waits between retries hold nothing. A transfer's time held back
/// is not counted against its timeouts (`TransferDeadlines`).
final class PendingBytes: DownloadGate {
    /// How the budget is kept, with the defaults a worker runs with.
    struct Configuration: Sendable {
        /// Bytes of sources held before transfers wait (`--max-pending-bytes`).
        var limit: Int
        /// The span of a transfer's running time its speed is judged over. Default 1 s: a
        /// transfer that stops moving is judged so within two of them.
        var window: Duration = .seconds(1)
        /// The speed, in bytes a second, below which a transfer is not moving. Default 64 KiB/s:
        /// a drip of a few KB/s (which libcurl's low-speed abort lets live) is far below it, and
        /// an origin that serves images at any usable speed far above.
        var movingRate: Int = 64 << 10

        init(limit: Int) { self.limit = limit }

        /// Bytes of transfers that are not moving that count against no one: as much as `limit`.
        var parkedAllowance: Int { limit }

        /// The bytes a moving transfer receives in one `window`.
        var windowQuota: Double { Double(movingRate) * window.seconds }

        /// Checks every value (`job.invalid_options` naming it).
        func validate() throws(HalcyonError) {
            guard limit >= 1 else { throw HalcyonError(.invalidOptions, "the pending-bytes budget must be at least 1 byte, not \(limit)") }
            guard window >= .milliseconds(10), window <= .minutes(1) else {
                throw HalcyonError(.invalidOptions, "the pending-bytes speed window must be 10ms–1m, not \(TimeSpan.format(window))")
            }
            guard movingRate >= 1 else {
                throw HalcyonError(.invalidOptions, "the pending-bytes moving rate must be at least 1 byte/s, not \(movingRate)")
            }
        }
    }

    let configuration: Configuration
    var limit: Int { configuration.limit }

    /// One transfer under way, as the gate sees it.
    private struct Transfer {
        /// Admission order: the oldest is the smallest.
        let order: UInt64
        let started: ContinuousClock.Instant
        var counted = 0
        var heldBack: Duration = .zero
        var heldBackSince: ContinuousClock.Instant?
        /// The current window: where it began (in running time) and the bytes received since.
        var windowStart: Duration = .zero
        var windowBytes = 0
        /// The last verdict; a new transfer moves until a window says otherwise.
        var moving = true

        /// Time since it started, less the time it was held back.
        func running(at now: ContinuousClock.Instant) -> Duration {
            now - started - heldBack - (heldBackSince.map { now - $0 } ?? .zero)
        }

        /// Moving as soon as the window's bytes reach its quota; otherwise judged when the
        /// window ends. A transfer held back keeps its verdict (its clock stands still).
        mutating func judge(at now: ContinuousClock.Instant, _ c: Configuration) {
            if Double(windowBytes) >= c.windowQuota { moving = true }
            let span = running(at: now) - windowStart
            guard span >= c.window else { return }
            moving = Double(windowBytes) >= Double(c.movingRate) * span.seconds
            windowStart += span
            windowBytes = 0
        }

        mutating func holdBack(at now: ContinuousClock.Instant) {
            if heldBackSince == nil { heldBackSince = now }
        }

        mutating func goOn(at now: ContinuousClock.Instant) {
            if let since = heldBackSince { heldBack += now - since }
            heldBackSince = nil
        }
    }

    private struct State {
        /// Every byte held: arriving and downloaded.
        var held = 0
        /// The most ever held.
        var peak = 0
        /// The bytes of transfers not moving, as last judged.
        var parked = 0
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var nextID: UInt64 = 0
        var transfers: [UInt64: Transfer] = [:]
        /// Transfers held back at a chunk, woken when bytes are given back or the privilege moves.
        var blocked: [UInt64: DispatchSemaphore] = [:]
        /// The transfer that goes on over the budget.
        var privileged: UInt64?
        /// Re-judges the transfers while some wait to start (transfers held back re-judge them
        /// as they poll); nil when none waits.
        var timer: (any DispatchSourceTimer)?

        mutating func add(_ bytes: Int) {
            held += bytes
            peak = max(peak, held)
        }
    }
    private let state = Mutex(State())

    init(configuration: Configuration) {
        var c = configuration
        c.limit = max(1, c.limit)
        c.window = min(max(c.window, .milliseconds(10)), .minutes(1))
        c.movingRate = max(1, c.movingRate)
        self.configuration = c
    }

    /// Bytes held now (downloaded and arriving).
    var held: Int { state.withLock { $0.held } }
    /// The most bytes held at once so far.
    var peak: Int { state.withLock { $0.peak } }
    /// Bytes of transfers that are not moving, as last judged.
    var parked: Int { state.withLock { $0.parked } }

    /// Returns true once fewer than `limit` bytes count (parked bytes within the allowance do
    /// not), false when `cancel` is raised first.
    func admit(cancel: CancellationFlag) async -> Bool {
        if cancel.isCancelled { return false }
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool in
                if settle(&s, at: .now) < limit { return true }
                s.waiters[id] = c
                startTimer(&s)
                return false
            }
            if now {
                c.resume(returning: true)
                return
            }
            cancel.onCancel { [self] in
                state.withLock { s in
                    defer { if s.waiters.isEmpty { stopTimer(&s) } }
                    return s.waiters.removeValue(forKey: id)
                }?.resume(returning: false)
            }
        }
    }

    func meter(cancel: CancellationFlag) -> any EndableTransferMeter {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            s.transfers[s.nextID] = Transfer(order: s.nextID, started: .now)
            return s.nextID
        }
        return Meter(id: id, gate: self, cancel: cancel)
    }

    /// A job now holds `bytes` of source until `release(_:)`.
    func hold(_ bytes: Int) {
        state.withLock { $0.add(bytes) }
    }

    /// `bytes` are no longer held (the job's processing ended); if that makes room, the waiting
    /// transfers go on.
    func release(_ bytes: Int) {
        wake(
            state.withLock { s in
                s.held -= bytes
                let before = s.privileged
                return takeWoken(&s, privilegedBefore: before)
            })
    }

    // MARK: Transfers

    /// One transfer's meter: what it counted is given back when it ends (the job that keeps
    /// the body holds it again, `hold(_:)`).
    private final class Meter: EndableTransferMeter {
        let id: UInt64
        let gate: PendingBytes
        let cancel: CancellationFlag
        private let ended = Atomic(false)

        init(id: UInt64, gate: PendingBytes, cancel: CancellationFlag) {
            self.id = id
            self.gate = gate
            self.cancel = cancel
        }

        func received(_ bytes: Int) -> Bool {
            gate.received(bytes, by: id, cancel: cancel)
        }

        func end() {
            guard !ended.exchange(true, ordering: .relaxed) else { return }
            gate.ended(id)
        }
    }

    /// Counts `bytes` more for transfer `id`, then holds it back while more than `limit` bytes
    /// count and it is not the privileged transfer. Called on the transfer's blocking thread.
    fileprivate func received(_ bytes: Int, by id: UInt64, cancel: CancellationFlag) -> Bool {
        state.withLock { s in
            s.add(bytes)
            s.transfers[id]?.counted += bytes
            s.transfers[id]?.windowBytes += bytes
        }
        while !cancel.isCancelled {
            let (semaphore, woken) = state.withLock { s -> (DispatchSemaphore?, Woken) in
                let now = ContinuousClock.now
                let before = s.privileged
                let counting = settle(&s, at: now)
                if counting <= limit || s.privileged == id {
                    s.transfers[id]?.goOn(at: now)
                    return (nil, takeWoken(&s, privilegedBefore: before, counting: counting))
                }
                s.transfers[id]?.holdBack(at: now)
                let semaphore = DispatchSemaphore(value: 0)
                s.blocked[id] = semaphore
                return (semaphore, takeWoken(&s, privilegedBefore: before, counting: counting))
            }
            wake(woken)
            guard let semaphore else { return true }
            // Woken when bytes are given back or the privilege moves; the timeout re-judges the
            // transfers (one that stopped moving sends nothing to tell) and re-reads `cancel`.
            _ = semaphore.wait(timeout: .now() + .milliseconds(Self.pollMilliseconds))
            state.withLock { _ = $0.blocked.removeValue(forKey: id) }
        }
        state.withLock { $0.transfers[id]?.goOn(at: .now) }
        return false
    }

    fileprivate func ended(_ id: UInt64) {
        wake(
            state.withLock { s in
                let before = s.privileged
                if let transfer = s.transfers.removeValue(forKey: id) { s.held -= transfer.counted }
                if s.privileged == id { s.privileged = nil }
                return takeWoken(&s, privilegedBefore: before)
            })
    }

    /// How often transfers held back, and the timer of transfers waiting to start, re-judge.
    static let pollMilliseconds = 100

    /// Judges every transfer, moves the privilege where it belongs, and returns the bytes that
    /// count against the budget: all held, less the parked ones within the allowance.
    private func settle(_ s: inout State, at now: ContinuousClock.Instant) -> Int {
        var parked = 0
        for i in s.transfers.indices {
            s.transfers.values[i].judge(at: now, configuration)
            if !s.transfers.values[i].moving { parked += s.transfers.values[i].counted }
        }
        s.parked = parked
        func oldestMoving(except: UInt64?) -> UInt64? {
            s.transfers.values.filter { $0.moving && $0.order != except }.map(\.order).min()
        }
        if let p = s.privileged, let holder = s.transfers[p] {
            // A holder that stopped moving gives way to one that moves — only while the parked
            // bytes (its own among them) fit the allowance, so the hand-over adds nothing held
            // beyond it.
            if !holder.moving, parked <= configuration.parkedAllowance, let next = oldestMoving(except: p) {
                s.privileged = next
            }
        } else {
            s.privileged = oldestMoving(except: nil) ?? s.transfers.values.map(\.order).min()
        }
        return s.held - min(parked, configuration.parkedAllowance)
    }

    private typealias Woken = (admitted: [CheckedContinuation<Bool, Never>], blocked: [DispatchSemaphore])

    /// Everyone to wake after bytes were given back or the transfers were re-judged: transfers
    /// held back when there is room or the privilege moved; waiting starts when fewer than
    /// `limit` bytes count.
    private func takeWoken(_ s: inout State, privilegedBefore: UInt64?, counting: Int? = nil) -> Woken {
        let counting = counting ?? settle(&s, at: .now)
        let blocked = counting <= limit || s.privileged != privilegedBefore ? Array(s.blocked.values) : []
        guard counting < limit, !s.waiters.isEmpty else { return ([], blocked) }
        defer {
            s.waiters = [:]
            stopTimer(&s)
        }
        return (Array(s.waiters.values), blocked)
    }

    private func wake(_ woken: Woken) {
        woken.blocked.forEach { $0.signal() }
        woken.admitted.forEach { $0.resume(returning: true) }
    }

    /// While transfers wait to start, a timer re-judges those under way: one that stopped
    /// moving sends nothing that would.
    private func startTimer(_ s: inout State) {
        guard s.timer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: .global())
        let interval = DispatchTimeInterval.milliseconds(Self.pollMilliseconds)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            wake(
                state.withLock { s in
                    let before = s.privileged
                    return takeWoken(&s, privilegedBefore: before)
                })
        }
        timer.resume()
        s.timer = timer
    }

    private func stopTimer(_ s: inout State) {
        s.timer?.cancel()
        s.timer = nil
    }
}
