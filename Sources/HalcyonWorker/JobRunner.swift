import Foundation
import HalcyonCore
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonStore

/// Runs one job's pipeline — validate, fetch (source, then fallbacks), process, store — and
/// returns what to record. It never touches the database; `Worker` records the outcome.
struct JobRunner: Sendable {
    let fetcher: Fetcher
    let store: DiskStore
    let limits: ImageLimits
    let fetchSlots: AsyncSemaphore
    let processSlots: AsyncSemaphore

    init(configuration: WorkerConfiguration) {
        fetcher = Fetcher(configuration: configuration.fetch)
        store = DiskStore(root: configuration.storeRoot)
        limits = configuration.limits
        fetchSlots = AsyncSemaphore(configuration.fetchConcurrency)
        processSlots = AsyncSemaphore(configuration.concurrency)
    }

    func run(_ job: Job, cancel: CancellationFlag) async throws(HalcyonError) -> JobResult {
        // Everything that can be judged from the row is judged before any download.
        let options = try JobOptions.parse(json: job.options)
        let chain = try ProcessorChain.parse(job.processors)
        let sources = [job.source] + job.fallbackSources
        for s in sources { _ = try Source.parse(s, maxDataBytes: fetcher.configuration.maxBytes) }
        let key = chain.resultKey(cacheKey: cacheKey(source: job.source, explicit: job.cacheKey))

        let fetched = try await fetchFirstWorking(sources, headers: options.headers, cancel: cancel)
        if cancel.isCancelled { throw HalcyonError(.internal, "job abandoned") }

        let limits = self.limits
        let processed: ProcessedImage
        do {
            processed = try await processSlots.withPermit {
                try await Blocking.run { try ImagePipeline.run(fetched.data, format: fetched.format, chain: chain, limits: limits) }
            }
        } catch {
            throw HalcyonError.wrap(error)
        }
        let store = self.store
        let stored: StoredObject
        do {
            stored = try await Blocking.run { try store.put(processed.data, ext: processed.format.fileExtension) }
        } catch {
            throw HalcyonError.wrap(error)
        }
        return JobResult(key: key, digest: stored.digest, path: stored.path, bytes: stored.bytes,
                         width: processed.width, height: processed.height, format: processed.format.rawValue,
                         cacheHit: false, source: fetched.source)
    }

    /// Tries each source in order. One failing source fails the job with its own error; when
    /// several all fail, `fetch.sources_exhausted` lists each, transient if any one was.
    private func fetchFirstWorking(_ sources: [String], headers: [String: String], cancel: CancellationFlag) async throws(HalcyonError) -> FetchedImage {
        var failures: [HalcyonError] = []
        for source in sources {
            do {
                return try await fetchSlots.withPermit { () async throws(HalcyonError) -> FetchedImage in
                    try await fetcher.fetch(source, headers: headers, cancel: cancel)
                }
            } catch {
                let e = HalcyonError.wrap(error)
                if cancel.isCancelled { throw e }
                failures.append(e)
            }
        }
        if failures.count == 1 { throw failures[0] }
        let detail = failures.map { SourceFailure(source: $0.source ?? "?", code: $0.code, message: $0.message, attempts: 1) }
        throw HalcyonError(.sourcesExhausted,
                           "all \(failures.count) sources failed: " + failures.map { "\($0.code)" }.joined(separator: ", "),
                           permanent: failures.allSatisfy(\.permanent), source: sources.first, sources: detail)
    }
}
