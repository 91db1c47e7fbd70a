import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonStore

/// Runs jobs' pipelines — validate, fetch (source, then fallbacks), process, store — and
/// returns what to record. Jobs of one claimed batch that share a source run as a group: one
/// download, one decode, each chain on a clone. It never touches the database; `Worker`
/// records the outcomes.
struct JobRunner: Sendable {
    let fetcher: Fetcher
    let store: DiskStore
    let limits: ImageLimits
    let processSlots: AsyncSemaphore
    let pendingBytes: PendingBytes
    let metrics: Metrics

    /// One job's outcome and where its time went.
    struct Outcome: Sendable {
        var result: Result<JobResult, HalcyonError>
        var timings: StageTimings
    }

    init(configuration: WorkerConfiguration, metrics: Metrics) {
        self.metrics = metrics
        var fetch = configuration.fetch
        if fetch.originalsTTL > 0, fetch.originals == nil {
            fetch.originals = OriginalsStore(storeRoot: configuration.storeRoot)
        }
        pendingBytes = PendingBytes(limit: configuration.maxPendingBytes)
        fetcher = Fetcher(configuration: fetch, concurrency: configuration.fetchConcurrency, gate: pendingBytes)
        store = DiskStore(root: configuration.storeRoot)
        limits = configuration.limits
        processSlots = AsyncSemaphore(configuration.concurrency)
    }

    /// What must match for jobs to share a download and a decode.
    static func groupKey(_ job: Job) -> String {
        let headers = (try? JobOptions.parse(json: job.options).headers) ?? [:]
        return ([job.source] + job.fallbackSources).joined(separator: "\n") + "\n#"
            + headers.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: "\n")
    }

    /// Splits a claimed batch into groups that share a source, keeping claim order.
    static func groups(_ jobs: [Job]) -> [[Job]] {
        var order: [String] = []
        var byKey: [String: [Job]] = [:]
        for job in jobs {
            let key = groupKey(job)
            if byKey[key] == nil { order.append(key) }
            byKey[key, default: []].append(job)
        }
        return order.map { byKey[$0]! }
    }

    /// Runs a group of jobs with the same source; the results are in the order of `jobs`.
    /// `cancels` are the jobs' flags: the shared download stops only when every job is gone.
    func run(_ jobs: [Job], cancels: [CancellationFlag]) async -> [Outcome] {
        var results = [Result<JobResult, HalcyonError>?](repeating: nil, count: jobs.count)
        var timings = jobs.map { job -> StageTimings in
            var t = StageTimings()
            t.queueWait = job.queueWait
            return t
        }
        // Everything that can be judged from the row is judged before any download.
        var valid: [Planned] = []
        for (i, job) in jobs.enumerated() {
            do {
                let options = try JobOptions.parse(json: job.options)
                let chain = try ProcessorChain.parse(job.processors)
                for s in [job.source] + job.fallbackSources { _ = try Source.parse(s, maxDataBytes: fetcher.configuration.maxDataBytes) }
                valid.append(Planned(index: i, options: options, chain: chain,
                                     key: chain.resultKey(cacheKey: cacheKey(source: job.source, explicit: job.cacheKey))))
            } catch {
                results[i] = .failure(error)
            }
        }
        // Store hits complete without touching the network.
        let store = self.store
        let lookups = valid.filter { !$0.options.forceRefresh }.map { ($0.key, $0.options.extend) }
        let lookupStarted = ContinuousClock.now
        let hits: [String: CachedResult] = lookups.isEmpty ? [:] : (try? await Blocking.run {
            var found: [String: CachedResult] = [:]
            for (key, extend) in lookups where found[key] == nil { found[key] = store.lookup(key, extend: extend) }
            return found
        }) ?? [:]
        let lookupSeconds = (ContinuousClock.now - lookupStarted).seconds / Double(max(1, lookups.count))
        var misses: [Planned] = []
        for v in valid {
            if !v.options.forceRefresh, let hit = hits[v.key] {
                results[v.index] = .success(JobResult(key: v.key, digest: hit.object.digest, path: hit.object.path, bytes: hit.object.bytes,
                                                      width: hit.info.width, height: hit.info.height, format: hit.info.format,
                                                      cacheHit: true, source: nil))
                timings[v.index].store = lookupSeconds
                metrics.cacheHit()
            } else if v.options.onlyFromCache {
                results[v.index] = .failure(HalcyonError(.notCached, "no unexpired stored result for '\(v.key.prefix(300))' (only_from_cache)"))
            } else {
                misses.append(v)
            }
        }
        if let first = misses.first {
            let outcomes = await runMisses(jobs[first.index], misses, cancel: Self.allCancelled(misses.map { cancels[$0.index] }))
            for (v, outcome) in zip(misses, outcomes) {
                timings[v.index] = outcome.timings
                timings[v.index].queueWait = jobs[v.index].queueWait
                results[v.index] = outcome.result.map { stored in
                    JobResult(key: v.key, digest: stored.object.digest, path: stored.object.path, bytes: stored.object.bytes,
                              width: stored.image.width, height: stored.image.height, format: stored.image.format.rawValue,
                              cacheHit: false, source: stored.source)
                }
            }
        }
        return zip(results, timings).map { Outcome(result: $0!, timings: $1) }
    }

    /// A job that passed validation, and its result key.
    private struct Planned: Sendable {
        var index: Int
        var options: JobOptions
        var chain: ProcessorChain
        var key: String
    }

    private struct Stored: Sendable {
        var object: StoredObject
        var image: ProcessedImage
        var source: String
    }

    /// A miss's outcome and its stage timings (all but the queue wait).
    private typealias Attempt = (result: Result<Stored, HalcyonError>, timings: StageTimings)

    /// Fetch once (with the first job's sources and headers: the group shares them), decode
    /// once, one chain per job, store each result under its key. Nothing starts once `cancel`
    /// is raised (every job of the group released, cancelled or lost): not the download, not
    /// the wait for a slot, not the next step or the store.
    private func runMisses(_ job: Job, _ planned: [Planned], cancel: CancellationFlag) async -> [Attempt] {
        var timings = StageTimings()
        func all(_ e: HalcyonError) -> [Attempt] { planned.map { _ in (.failure(e), timings) } }
        let fetched: FetchedImage
        let fetchStarted = ContinuousClock.now
        do {
            let options = planned[0].options
            fetched = try await fetcher.fetch(sources: [job.source] + job.fallbackSources, headers: options.headers,
                                              retry: options.retry.map { DelayRetryStrategy($0) }, cancel: cancel)
            timings.fetch = (ContinuousClock.now - fetchStarted).seconds
            metrics.fetched(bytes: fetched.data.count)
        } catch {
            timings.fetch = (ContinuousClock.now - fetchStarted).seconds
            return all(error)
        }
        // Held until processed: transfers wait (`PendingBytes`) while too many bytes are.
        let held = fetched.data.count
        pendingBytes.hold(held)
        defer { pendingBytes.release(held) }
        let limits = self.limits, store = self.store
        let processed: [Result<ProcessedImage, HalcyonError>]
        do {
            let chains = planned.map(\.chain)
            processed = try await processSlots.withPermit(cancel: cancel) {
                try await Blocking.run { try ImagePipeline.run(fetched.data, format: fetched.format, chains: chains, limits: limits, cancel: cancel) }
            }
            metrics.decoded()
        } catch {
            return all(HalcyonError.wrap(error))
        }
        var out: [Attempt] = []
        for (p, result) in zip(planned, processed) {
            var t = timings
            switch result {
            case .failure(let e): out.append((.failure(e), t))
            case .success(let image):
                t.decode = image.decodeSeconds
                t.process = image.processSeconds
                t.encode = image.encodeSeconds
                guard !cancel.isCancelled else {
                    out.append((.failure(.abandoned), t))
                    continue
                }
                let storeStarted = ContinuousClock.now
                do {
                    let object = try await Blocking.run {
                        try store.store(image.data, ext: image.format.fileExtension,
                                        info: ResultInfo(format: image.format.rawValue, width: image.width, height: image.height),
                                        key: p.key, expiration: p.options.expiration)
                    }
                    t.store = (ContinuousClock.now - storeStarted).seconds
                    if !object.existed { metrics.stored(bytes: object.bytes) }
                    out.append((.success(Stored(object: object, image: image, source: fetched.source)), t))
                } catch {
                    t.store = (ContinuousClock.now - storeStarted).seconds
                    out.append((.failure(HalcyonError.wrap(error)), t))
                }
            }
        }
        return out
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
