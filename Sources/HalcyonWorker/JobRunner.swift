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
    let processSlots: AsyncSemaphore

    init(configuration: WorkerConfiguration) {
        var fetch = configuration.fetch
        if fetch.originalsTTL > 0, fetch.originals == nil {
            fetch.originals = OriginalsStore(storeRoot: configuration.storeRoot)
        }
        fetcher = Fetcher(configuration: fetch, concurrency: configuration.fetchConcurrency)
        store = DiskStore(root: configuration.storeRoot)
        limits = configuration.limits
        processSlots = AsyncSemaphore(configuration.concurrency)
    }

    func run(_ job: Job, cancel: CancellationFlag) async throws(HalcyonError) -> JobResult {
        // Everything that can be judged from the row is judged before any download.
        let options = try JobOptions.parse(json: job.options)
        let chain = try ProcessorChain.parse(job.processors)
        let sources = [job.source] + job.fallbackSources
        for s in sources { _ = try Source.parse(s, maxDataBytes: fetcher.configuration.maxBytes) }
        let key = chain.resultKey(cacheKey: cacheKey(source: job.source, explicit: job.cacheKey))

        let fetched = try await fetcher.fetch(sources: sources, headers: options.headers,
                                              retry: options.retry.map { DelayRetryStrategy($0) }, cancel: cancel)
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
}
