import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTracing

/// Runs planned jobs' pipelines — store lookup, fetch (source, then fallbacks), process,
/// store — and returns what to record. The jobs come judged (`JobPlan`, made right after the
/// claim): one whose plan failed fails before any lookup or download. A claim's lookups are
/// made together first (`lookUp`), and a hit completes without touching the network. Jobs of
/// one claimed batch that share a source run as a group: one download, one decode, each chain
/// on a clone of the decoded image (the last on the image itself). It never touches the
/// database: the `Claimer` hands the outcomes to the `OutcomeRecorder`, which records them.
struct JobRunner: Sendable {
    let fetcher: Fetcher
    let store: any ResultStore
    /// Judges a refused write: the store's condition (the worker pauses) or the job's own.
    let health: StoreHealth
    let limits: ImageLimits
    let processSlots: AsyncSemaphore
    /// Local sources (`FetchRequest.isLocal`) read and not yet processed: twice the processing
    /// slots, so the next is read while one is decoded, but not one per download slot —
    /// read-ahead hides a network's latency; a file has none worth holding memory for. (W1: peak
    /// RSS 150 → 121 MB at the same speed.)
    let localReads: AsyncSemaphore
    static let localReadsPerSlot = 2
    let pendingBytes: PendingBytes
    let metrics: Metrics
    let watermarks: Watermarks
    /// The supervisor told which jobs are in processing, when the worker has one.
    let supervisor: SupervisorChannel?
    /// Called on the processing thread as each chain of a group starts, with the group's
    /// sources: the one place a fault can be injected into image work (the suite's
    /// `halcyon-faults` build sets it; nil in `halcyon`).
    let chainStarted: ChainStartedHook?
    /// The jobs in processing and holding bytes here, as the supervisor is told: at a stop, a
    /// job stuck in one call past its deadline is charged, not released.
    let processing = ProcessingTracker()

    /// One job's outcome and where its time went.
    struct Outcome: Sendable {
        var result: Result<JobResult, HalcyonError>
        var timings: StageTimings
        /// Its stages as spans, for a traced job (`JobPlan.trace`); empty otherwise.
        var stages: [StageSpan] = []
        /// Spans of other jobs' traces its attempt used: a download it shared.
        var links: [SpanContext] = []
    }

    init(
        configuration: WorkerConfiguration, store: any ResultStore, health: StoreHealth, metrics: Metrics,
        chainStarted: ChainStartedHook? = nil
    ) {
        self.health = health
        self.metrics = metrics
        self.chainStarted = chainStarted
        var fetch = configuration.fetch
        if fetch.originalsTTL > .zero, fetch.originals == nil {
            fetch.originals = store.originals
        }
        pendingBytes = PendingBytes(configuration: PendingBytes.Configuration(limit: configuration.maxPendingBytes))
        fetcher = Fetcher(configuration: fetch, concurrency: configuration.fetchConcurrency, gate: pendingBytes)
        self.store = store
        limits = configuration.limits
        processSlots = AsyncSemaphore(configuration.concurrency)
        localReads = AsyncSemaphore(configuration.concurrency * Self.localReadsPerSlot)
        watermarks = Watermarks(fetcher: fetcher, limits: configuration.limits, maxDataBytes: configuration.fetch.maxDataBytes)
        supervisor = configuration.supervisor
    }

    /// What the store held for a claim's jobs, looked up together (one batch per claim, not one
    /// per group: a claim of store hits is mostly groups of one; a disk store reads the batch on
    /// one I/O thread, a bucket's lookups go side by side).
    struct StoreHits: Sendable {
        var found: [String: CachedResult] = [:]
        var secondsPerLookup: Double = 0
        /// When the lookups began (a traced hit's `store` span).
        var started = WallTime.now()
    }

    /// Runs a group of planned jobs with the same source; the outcomes are in the order of
    /// `plans`. `cancels` are the jobs' flags: the shared download stops only when every job is
    /// gone. `hits` holds what `lookUp` found for them.
    func run(_ plans: [JobPlan], cancels: [CancellationFlag], hits: StoreHits) async -> [Outcome] {
        var results = [Result<JobResult, HalcyonError>?](repeating: nil, count: plans.count)
        var traces = plans.map { _ in (stages: [StageSpan](), links: [SpanContext]()) }
        var timings = plans.map { plan -> StageTimings in
            var timing = StageTimings()
            timing.queueWait = plan.job.queueWait
            return timing
        }
        // Jobs that failed validation fail now, before any lookup or download.
        var valid: [(index: Int, plan: JobPlan.Valid)] = []
        for (index, plan) in plans.enumerated() {
            switch plan.validated {
            case .success(let v): valid.append((index, v))
            case .failure(let error): results[index] = .failure(error)
            }
        }
        // Store hits complete without touching the network.
        var misses: [(index: Int, plan: JobPlan.Valid)] = []
        for (index, plan) in valid {
            // A stored result serves a job only with every placeholder the job asks for (the
            // stored ones are read only for a job that asks for some).
            let stored =
                plan.options.placeholders == nil ? nil : hits.found[plan.storeKey]?.info.placeholdersJSON.flatMap(Placeholders.init(jsonText:))
            // The same for the perceptual hashes.
            let hashed = hits.found[plan.storeKey].map { plan.options.perceptualHash?.isSatisfied(by: $0.info) ?? true } ?? false
            // A picture set's key serves only with its manifest (`lookUp` found every rung there).
            let manifest =
                plan.chain.chain.breakpoints == nil ? nil : hits.found[plan.storeKey]?.info.manifestJSON.flatMap(PictureManifest.init(jsonText:))
            let whole = plan.chain.chain.breakpoints == nil || manifest != nil
            if let hit = hits.found[plan.storeKey], !plan.options.forceRefresh, plan.options.placeholders?.isSatisfied(by: stored) ?? true, hashed,
                whole
            {
                var result = JobResult(
                    key: plan.resultKey, object: hit.object, info: hit.info, cacheHit: true, source: nil, target: plan.chain.minScore)
                result.placeholdersJSON = plan.options.placeholders?.select(from: stored)?.json.jsonText
                result.keepHashes(plan.options.perceptualHash)
                result.manifestJSON = manifest?.rowJSON(plan.options.picture ?? PictureOptions())
                results[index] = .success(result)
                timings[index].store = hits.secondsPerLookup
                metrics.cacheHit()
                if plans[index].trace != nil {
                    traces[index].stages.append(
                        StageSpan(
                            name: "store", start: hits.started, end: hits.started.adding(seconds: hits.secondsPerLookup),
                            attributes: [("halcyon.store.outcome", .string("hit")), ("halcyon.store.object", .string(hit.object.path))]))
                }
            } else if plan.options.onlyFromCache {
                results[index] = .failure(
                    HalcyonError(.notCached, "no unexpired stored result for '\(plan.resultKey.prefix(300))' (only_from_cache)"))
            } else {
                misses.append((index, plan))
            }
        }
        if !misses.isEmpty {
            let outcomes = await runMisses(
                misses.map(\.plan), traces: misses.map { plans[$0.index].trace }, cancel: Self.allCancelled(misses.map { cancels[$0.index] }))
            for ((index, _), outcome) in zip(misses, outcomes) {
                timings[index] = outcome.timings
                timings[index].queueWait = plans[index].job.queueWait
                results[index] = outcome.result
                traces[index] = (outcome.stages, outcome.links)
            }
        }
        return results.indices.map { i in
            Outcome(result: results[i] ?? .failure(.abandoned), timings: timings[i], stages: traces[i].stages, links: traces[i].links)
        }
    }

    /// Looks up the stored results of the valid plans that may use one (the store's calls hold no
    /// thread of the caller's).
    func lookUp(_ plans: [JobPlan]) async -> StoreHits {
        let lookups: [(key: String, extend: ExpirationExtending)] = plans.compactMap { plan in
            guard case .success(let valid) = plan.validated, !valid.options.forceRefresh else { return nil }
            return (valid.storeKey, valid.options.extend)
        }
        guard !lookups.isEmpty else { return StoreHits() }
        let store = self.store
        let started = ContinuousClock.now, wall = WallTime.now()
        var found = await store.lookup(lookups, now: Date())
        // A picture set's hit holds only while every rung it lists is a hit under its own key,
        // naming the same object: the rungs' lookups (side by side where the store waits on a
        // network) mark them accessed and apply the job's `extend` to them as to the set's key.
        // Else the set is made again.
        var rungLookups: [(key: String, extend: ExpirationExtending)] = []
        var sets: [(storeKey: String, rungs: [(key: String, path: String)])] = []
        for case .success(let valid) in plans.map(\.validated) where valid.chain.chain.breakpoints != nil {
            guard let hit = found[valid.storeKey] else { continue }
            guard let manifest = hit.info.manifestJSON.flatMap(PictureManifest.init(jsonText:)),
                let keys = try? manifest.rungs.map({ rung throws(HalcyonError) in
                    (key: try valid.rungStoreKey(width: rung.width, format: try Self.formatStepFormat(rung.format)), path: rung.path)
                })
            else {
                found[valid.storeKey] = nil
                continue
            }
            sets.append((valid.storeKey, keys))
            rungLookups += keys.map { ($0.key, valid.options.extend) }
        }
        if !rungLookups.isEmpty {
            let rungs = await store.lookup(rungLookups, now: Date())
            for set in sets where !set.rungs.allSatisfy({ rungs[$0.key]?.object.path == $0.path }) { found[set.storeKey] = nil }
        }
        return StoreHits(found: found, secondsPerLookup: (ContinuousClock.now - started).seconds / Double(lookups.count), started: wall)
    }

    /// The `format` step's name for a rung's format.
    static func formatStepFormat(_ format: ImageFormat) throws(HalcyonError) -> FormatStep.Format {
        guard let named = FormatStep.Format(rawValue: format.rawValue) else {
            throw HalcyonError(.internal, "a rung in \(format.rawValue), which no format step names")
        }
        return named
    }

    /// A miss's outcome, its stage timings (all but the queue wait) and, traced, its spans.
    private typealias Attempt = (result: Result<JobResult, HalcyonError>, timings: StageTimings, stages: [StageSpan], links: [SpanContext])

    /// Fetch once (the group shares its sources and headers), decode once, one chain per job,
    /// store each result under its key. Nothing starts once `cancel` is raised (every job of the
    /// group released, cancelled or lost): not the download, not the wait for a slot, not the
    /// next step or the store.
    private func runMisses(_ plans: [JobPlan.Valid], traces: [JobTrace?], cancel: CancellationFlag) async -> [Attempt] {
        // From the first byte fetched to the last stored, the group's jobs hold memory here: a
        // memory kill charges them wherever they are (the supervisor is told).
        let holders = plans.map(\.jobID)
        report(.holding(holders))
        defer { report(.dropped(holders)) }
        var timings = StageTimings()
        // Traced jobs' spans: the shared download is a span of the first traced job's, linked
        // from the others'.
        let tracing = traces.contains { $0 != nil }
        var stages = plans.map { _ in [StageSpan]() }, links = plans.map { _ in [SpanContext]() }
        func all(_ error: HalcyonError) -> [Attempt] { plans.indices.map { (.failure(error), timings, stages[$0], links[$0]) } }
        // The watermarks the chains draw (a job whose watermark cannot be had fails with its
        // error), loaded first: a local source's read permit is never held waiting on a network.
        let (marks, markFailures) = await loadWatermarks(plans, cancel: cancel)
        let local = plans[0].fetch.isLocal
        if local, await !localReads.wait(cancel: cancel) { return all(.abandoned) }
        var holdsLocal = local
        defer { if holdsLocal { localReads.signal() } }
        let fetched: FetchedImage
        let fetchStarted = ContinuousClock.now
        let trail = tracing ? FetchTrail() : nil
        func traceFetch() {
            guard let trail, let owner = traces.firstIndex(where: { $0 != nil }), let trace = traces[owner] else { return }
            let spans = StageSpans.fetch(trail.tries, sharedBy: plans.count)
            stages[owner] += spans
            for i in plans.indices where i != owner && traces[i] != nil {
                links[i] += spans.map { SpanContext(traceID: trace.traceID, spanID: $0.spanID, traceState: trace.traceState) }
            }
        }
        do {
            fetched = try await fetcher.fetch(plans[0].fetch, cancel: cancel, trail: trail)
            timings.fetch = (ContinuousClock.now - fetchStarted).seconds
            metrics.fetched(bytes: fetched.data.count)
            traceFetch()
        } catch {
            timings.fetch = (ContinuousClock.now - fetchStarted).seconds
            traceFetch()
            return all(error)
        }
        // Held until processed: transfers wait (`PendingBytes`) while too many bytes are.
        let held = fetched.data.count
        pendingBytes.hold(held)
        defer { pendingBytes.release(held) }
        var shares = plans.map { _ in timings }
        // Usage: the download is split evenly among the jobs that wanted it (the bytes' remainder
        // to the first), each job's share in its timings (`fetched_bytes`).
        for i in plans.indices { shares[i].fetchedBytes = held / plans.count + (i < held % plans.count ? 1 : 0) }
        let limits = self.limits
        let runnable = plans.indices.filter { markFailures[$0] == nil }
        var processed = plans.indices.map { i in markFailures[i].map { Result<ProcessedImage, HalcyonError>.failure($0) } }
        if !runnable.isEmpty {
            do {
                let chains = runnable.map { plans[$0].chain }, placeholders = runnable.map { plans[$0].options.placeholders }
                let scores = runnable.map { plans[$0].options.score }, hashes = runnable.map { plans[$0].options.perceptualHash }
                let ids = runnable.map { plans[$0].jobID }, sources = plans[0].fetch.sources.map(\.text)
                let report = self.report
                let phases = tracing ? PhaseClock() : nil
                let run = try await processSlots.withPermit(cancel: cancel, lane: plans[0].share) {
                    try await Blocking.run(.processing) {
                        // What a crash in here would cost, told to the supervisor first: every
                        // job of the group while the source is decoded, then each job alone —
                        // with this thread's CPU time, so that it knows what each spent.
                        defer { report(.finished(ids, .now())) }
                        return ImagePipeline.measured(
                            fetched.data, format: fetched.format, chains: chains, limits: limits, cancel: cancel, placeholders: placeholders,
                            scores: scores, hashes: hashes, watermarks: marks,
                            phases: { phase in
                                phases?.mark(phase)
                                switch phase {
                                case .decoding: report(.started(ids, .now(decoding: true)))
                                case .chain(let i):
                                    let now = ProcessingReport.ThreadTime.now()
                                    report(.finished(ids, now))
                                    report(.started([ids[i]], now))
                                    chainStarted?(sources)
                                }
                            })
                    }
                }
                // What was spent, whatever the outcome: the shared decode split evenly among the
                // jobs it was made for, each chain's own CPU to its job.
                for (n, i) in runnable.enumerated() {
                    shares[i].decodeCPU = run.cost.shared.cpu / Double(runnable.count)
                    (shares[i].processCPU, shares[i].encodeCPU) = run.cost.chains[n]
                }
                for (i, result) in zip(runnable, try run.outcome.get()) { processed[i] = result }
                metrics.decoded()
                if let phases {
                    for (n, i) in runnable.enumerated() where traces[i] != nil {
                        if case .success(let image)? = processed[i] {
                            stages[i] += StageSpans.image(image, chain: plans[i].chain, phases: phases, index: n, sharedBy: runnable.count)
                        }
                    }
                }
            } catch {
                return plans.indices.map { (.failure(HalcyonError.wrap(error)), shares[$0], stages[$0], links[$0]) }
            }
        }
        if holdsLocal {
            localReads.signal()
            holdsLocal = false
        }
        var out: [Attempt] = []
        for (i, ((plan, result), share)) in zip(zip(plans, processed), shares).enumerated() {
            var timing = share
            switch result ?? .failure(.abandoned) {
            case .failure(let error): out.append((.failure(error), timing, stages[i], links[i]))
            case .success(let image):
                timing.decode = image.decodeSeconds
                timing.process = image.processSeconds
                timing.encode = image.encodeSeconds
                let storeWall = traces[i] != nil ? WallTime.now() : nil
                let stored = await store(image, plan, source: fetched.source, cancel: cancel, timing: &timing)
                if let storeWall { stages[i].append(StageSpans.store(stored, start: storeWall, seconds: timing.store ?? 0)) }
                out.append((stored, timing, stages[i], links[i]))
            }
        }
        return out
    }

    /// The decoded watermarks `plans` draw, and for each plan (by index) whose watermark could
    /// not be fetched or decoded, that error — its own code, the message naming the watermark.
    private func loadWatermarks(_ plans: [JobPlan.Valid], cancel: CancellationFlag) async -> ([String: WatermarkSource], [Int: HalcyonError]) {
        let sources = plans.flatMap(\.chain.watermarkSources)
        guard !sources.isEmpty else { return ([:], [:]) }
        var marks: [String: WatermarkSource] = [:], failed: [String: HalcyonError] = [:]
        for (source, result) in await watermarks.load(sources, cancel: cancel) {
            switch result {
            case .success(let mark): marks[source] = mark
            case .failure(let e):
                failed[source] = HalcyonError(
                    e.code, "watermark \(source.prefix(200)): \(e.message)", permanent: e.permanent, source: source, sources: e.sources)
            }
        }
        var failures: [Int: HalcyonError] = [:]
        for (i, plan) in plans.enumerated() {
            if let error = plan.chain.watermarkSources.lazy.compactMap({ failed[$0] }).first { failures[i] = error }
        }
        return (marks, failures)
    }

    /// Stores one job's output under its result key.
    private func store(
        _ image: ProcessedImage, _ plan: JobPlan.Valid, source: String, cancel: CancellationFlag,
        timing: inout StageTimings
    ) async -> Result<JobResult, HalcyonError> {
        guard !cancel.isCancelled else { return .failure(.abandoned) }
        if let tooLarge = health.refusal(forResultOf: image.data.count) { return .failure(tooLarge) }
        let store = self.store
        var info = ResultInfo(
            format: image.format.rawValue, width: image.width, height: image.height, facts: image.source, placeholders: image.placeholders,
            quality: image.quality, halfQuality: image.halfQuality, score: image.score, chroma: image.chroma)
        info.sourceHash = image.sourceHash
        info.outputHash = image.outputHash
        info.sourceVariants = image.sourceVariants
        let started = ContinuousClock.now
        defer { timing.store = (ContinuousClock.now - started).seconds }
        do {
            // The store's CPU is what its work on I/O threads took (the hash, the file or the
            // requests), wherever it ran.
            let cpu = Blocking.CPUMeter()
            let manifest: PictureManifest?
            if let rungs = image.rungs {
                // Each rung under the key of the chain that makes it alone, then the set's own
                // key, whose record lists them: nothing names a rung before it is stored.
                manifest = try await Blocking.$cpuMeter.withValue(cpu) { () async throws(HalcyonError) -> PictureManifest in
                    try await storeRungs(rungs, of: image, plan, cancel: cancel)
                }
                info.manifestJSON = manifest?.storedJSON
            } else {
                manifest = nil
            }
            let object = try await Blocking.$cpuMeter.withValue(cpu) {
                try await store.store(
                    image.data, ext: image.format.fileExtension, info: info, key: plan.storeKey, expiration: plan.options.expiration)
            }
            timing.storeCPU = cpu.seconds
            if !object.existed { metrics.stored(bytes: object.bytes) }
            var result = JobResult(
                key: plan.resultKey, object: object, info: info, cacheHit: false, source: source, target: plan.chain.minScore)
            result.manifestJSON = manifest?.rowJSON(plan.options.picture ?? PictureOptions())
            if plan.options.keepGPS { result.facts = image.source.map(SourceRecord.init) }  // the store's copy has no position
            result.keepHashes(plan.options.perceptualHash)
            return .success(result)
        } catch {
            return .failure(await health.judge(HalcyonError.wrap(error), bytes: image.data.count))
        }
    }

    /// Stores a picture set's rungs, each under its own key (`JobPlan.Valid.rungStoreKey`) with
    /// its own facts; their manifest. Stops at the first refusal, and before a rung once `cancel`
    /// is raised.
    private func storeRungs(
        _ rungs: [EncodedRung], of image: ProcessedImage, _ plan: JobPlan.Valid, cancel: CancellationFlag
    )
        async throws(HalcyonError) -> PictureManifest
    {
        var stored: [PictureRung] = []
        for rung in rungs {
            guard !cancel.isCancelled else { throw HalcyonError.abandoned }
            if let tooLarge = health.refusal(forResultOf: rung.data.count) { throw tooLarge }
            let format = try Self.formatStepFormat(rung.format)
            let info = ResultInfo(
                format: rung.format.rawValue, width: rung.width, height: rung.height, facts: image.source, placeholders: nil,
                quality: rung.quality, halfQuality: rung.halfQuality, score: rung.score,
                chroma: rung.chroma)
            let object = try await store.store(
                rung.data, ext: rung.format.fileExtension, info: info, key: try plan.rungStoreKey(width: rung.width, format: format),
                expiration: plan.options.expiration)
            if !object.existed { metrics.stored(bytes: object.bytes) }
            stored.append(
                PictureRung(
                    width: rung.width, height: rung.height, format: rung.format, bytes: object.bytes, score: ResultMeasures.score(rung.score),
                    quality: ResultMeasures.quality(rung.quality), path: object.path))
        }
        return PictureManifest(rungs: stored)
    }

    /// Tells the supervisor (when there is one) and the worker's own tracker.
    @Sendable func report(_ report: ProcessingReport) {
        processing.apply(report)
        supervisor?.report(report)
    }

    /// A flag raised once every one of `flags` is.
    static func allCancelled(_ flags: [CancellationFlag]) -> CancellationFlag {
        guard flags.count > 1 else { return flags.first ?? CancellationFlag() }
        let combined = CancellationFlag()
        let remaining = Counter(flags.count)
        for f in flags {
            f.onCancel { if remaining.decrement() == 0 { combined.cancel() } }
        }
        return combined
    }
}

/// A thread-safe countdown.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int
    init(_ value: Int) { self.value = value }
    func decrement() -> Int { lock.lock(); defer { lock.unlock() }; value -= 1; return value }
}
