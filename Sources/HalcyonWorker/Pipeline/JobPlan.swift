import HalcyonCore
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonStore

/// One claimed job, judged once right after the claim: its options, its processor chain, its
/// sources and headers (the fetch request) and the key its result is stored under. Everything
/// downstream — grouping, the store lookup, the fetch, the chain, the result — reads the plan;
/// nothing parses the row again. A job no plan can be made for fails with that error
/// (`job.invalid_options`, `job.invalid_chain`, `job.invalid_source`) before any download.
struct JobPlan: Sendable {
    let job: Job
    let validated: Result<Valid, HalcyonError>

    /// What a valid job will do.
    struct Valid: Sendable {
        var options: JobOptions
        var chain: ProcessorChain
        var fetch: FetchRequest
        /// The store key of the result: the chain's identifier applied to the cache key.
        var resultKey: String
    }

    init(_ job: Job, maxDataBytes: Int) {
        self.job = job
        validated = Result { () throws(HalcyonError) -> Valid in
            let options = try Self.options(job)
            let chain = try ProcessorChain.parse(job.processors, presets: job.presets.mapValues(\.processors))
            for mark in chain.watermarkSources {
                do throws(HalcyonError) {
                    _ = try SourceReference(mark, maxDataBytes: maxDataBytes)
                } catch {
                    throw HalcyonError(error.code, "watermark: \(error.message)", source: mark)
                }
            }
            let fetch = try FetchRequest(
                sources: [job.source] + job.fallbackSources, headers: options.headers,
                retry: options.retry.map { DelayRetryStrategy($0) }, maxDataBytes: maxDataBytes)
            return Valid(
                options: options, chain: chain, fetch: fetch,
                resultKey: chain.resultKey(cacheKey: cacheKey(source: job.source, explicit: job.cacheKey)))
        }
    }

    /// The job's options over those of the presets its chain names (in chain order; the job's
    /// own keys win).
    static func options(_ job: Job) throws(HalcyonError) -> JobOptions {
        guard !job.presets.isEmpty else { return try JobOptions.parse(json: job.options) }
        guard case .object(let own)? = JSONValue.parse(job.options) else {
            throw HalcyonError(.invalidOptions, "options must be a JSON object")
        }
        var merged: [String: JSONValue] = [:]
        for name in ProcessorChain.presetNames(inOrder: job.processors) {
            for (key, value) in job.presets[name]?.options ?? [:] { merged[key] = value }
        }
        merged.merge(own) { _, mine in mine }
        return try JobOptions.parse(merged)
    }

    /// What must match for jobs to share a download and a decode (the fetch request's sharing
    /// key); an invalid job shares with nothing.
    var sharingKey: String {
        switch validated {
        case .success(let valid): valid.fetch.sharingKey
        case .failure: "invalid job \(job.id)"
        }
    }

    /// Plans a claimed batch and splits it into groups that share a source, keeping claim order.
    static func groups(of jobs: [Job], maxDataBytes: Int) -> [[JobPlan]] {
        var order: [String] = []
        var byKey: [String: [JobPlan]] = [:]
        for job in jobs {
            let plan = JobPlan(job, maxDataBytes: maxDataBytes)
            let key = plan.sharingKey
            if byKey[key] == nil { order.append(key) }
            byKey[key, default: []].append(plan)
        }
        return order.map { byKey[$0] ?? [] }
    }
}

extension JobResult {
    /// The result recorded for a job whose output is `object` in the store.
    init(key: String, object: StoredObject, info: ResultInfo, cacheHit: Bool, source: String?) {
        self.init(
            key: key, digest: object.digest, path: object.path, bytes: object.bytes,
            width: info.width, height: info.height, format: info.format, cacheHit: cacheHit, source: source,
            facts: info.source, placeholdersJSON: info.placeholdersJSON)
    }
}
