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
            let options = try JobOptions.parse(json: job.options)
            let chain = try ProcessorChain.parse(job.processors)
            let fetch = try FetchRequest(
                sources: [job.source] + job.fallbackSources, headers: options.headers,
                retry: options.retry.map { DelayRetryStrategy($0) }, maxDataBytes: maxDataBytes)
            return Valid(
                options: options, chain: chain, fetch: fetch,
                resultKey: chain.resultKey(cacheKey: cacheKey(source: job.source, explicit: job.cacheKey)))
        }
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
            facts: info.source, placeholders: info.placeholders)
    }
}
