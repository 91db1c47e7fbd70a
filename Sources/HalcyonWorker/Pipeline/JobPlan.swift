import HalcyonChain
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonTracing

/// One claimed job, judged once right after the claim: its options, its processor chain, its
/// sources and headers (the fetch request) and the key its result is stored under. Everything
/// downstream — grouping, the store lookup, the fetch, the chain, the result — reads the plan;
/// nothing parses the row again. A job no plan can be made for fails with that error
/// (`job.invalid_options`, `job.invalid_chain`, `job.invalid_source`) before any download.
struct JobPlan: Sendable {
    let job: Job
    let validated: Result<Valid, HalcyonError>
    /// This attempt's trace, when the worker exports spans and the job is sampled.
    var trace: JobTrace?

    /// What a valid job will do.
    struct Valid: Sendable {
        var jobID: Int64
        var options: JobOptions
        var chain: ProcessorChain
        var fetch: FetchRequest
        /// The key of the result, as recorded (`result_key`): the chain's identifier applied to
        /// the cache key.
        var resultKey: String
        /// What the store files it under: `resultKey`, scoped to the queue when the queue
        /// isolates its keys (`StoreLayout.storeKey`).
        var storeKey: String
        /// The cache key the result key is made of, and the queue that scopes the store's keys
        /// (nil when the queue shares them): a picture set's rungs are filed under keys of their own.
        var cacheKey: String
        var scope: String?
        /// The share of the worker's processing slots it waits in (`AsyncSemaphore`'s lane): its
        /// queue and fair key, so that a tenant's jobs claimed behind another's do not wait
        /// behind every job of that tenant the worker holds.
        var share: String
    }

    /// Whether the job's outcome goes to a webhook (its `callback_url`, as judged): a finished
    /// one wakes the deliverer rather than waiting for its poll. (A job whose options are
    /// invalid gets its delivery from the row all the same, at the next poll.)
    var wantsWebhook: Bool { (try? validated.get())?.options.callbackURL != nil }

    /// Judges `job`, reusing what `memo` holds from earlier jobs of its batch.
    init(_ job: Job, maxDataBytes: Int, memo: inout Memo) {
        self.job = job
        validated = Result { () throws(HalcyonError) -> Valid in
            let options = try memo.options(job)
            let chain = try memo.chain(job, maxDataBytes: maxDataBytes)
            let fetch = try FetchRequest(
                sources: [job.source] + job.fallbackSources, headers: options.headers,
                retry: options.retry.map { DelayRetryStrategy($0) }, maxDataBytes: maxDataBytes)
            let key = cacheKey(source: job.source, explicit: job.cacheKey)
            let resultKey = chain.resultKey(cacheKey: key)
            let scope = job.isolatedKeys ? job.queue : nil
            return Valid(
                jobID: job.id, options: options, chain: chain, fetch: fetch, resultKey: resultKey,
                storeKey: StoreLayout.storeKey(resultKey, scope: scope), cacheKey: key, scope: scope,
                share: job.queue + "\u{1F}" + (job.fairKey ?? ""))
        }
    }

    /// What a batch's jobs share: the jobs of a claim mostly repeat a few chains and options
    /// texts, and parsing them again for each was a fifth of a store hit's CPU.
    struct Memo {
        private var chains: [String: (presets: [String: Preset], chain: Result<ProcessorChain, HalcyonError>)] = [:]
        private var options: [String: Result<JobOptions, HalcyonError>] = [:]

        /// The job's chain (presets expanded), its watermark sources checked.
        mutating func chain(_ job: Job, maxDataBytes: Int) throws(HalcyonError) -> ProcessorChain {
            if let known = chains[job.processors], known.presets == job.presets { return try known.chain.get() }
            let chain = Result { () throws(HalcyonError) -> ProcessorChain in
                let chain = try ProcessorChain.parse(job.processors, presets: job.presets.mapValues(\.processors))
                try SourceReference.checkWatermarks(chain.watermarkSources, maxDataBytes: maxDataBytes)
                return chain
            }
            chains[job.processors] = (job.presets, chain)
            return try chain.get()
        }

        /// The job's options (over its presets'); texts without presets are parsed once.
        mutating func options(_ job: Job) throws(HalcyonError) -> JobOptions {
            guard job.presets.isEmpty else { return try JobPlan.options(job) }
            if let known = options[job.options] { return try known.get() }
            let parsed = Result { () throws(HalcyonError) -> JobOptions in try JobPlan.options(job) }
            options[job.options] = parsed
            return try parsed.get()
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
        for name in Chain.presetNames(inOrder: job.processors) {
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

    /// The preset names the chains of `jobs` use, by chain text: only chains that mention the
    /// word are parsed (by the chain grammar, each text once); empty when none names a preset.
    static func presetNames(_ jobs: [Job]) -> [String: Set<String>] {
        var names: [String: Set<String>] = [:]
        for job in jobs where names[job.processors] == nil && mentionsPreset(job.processors) {
            let used = Set(Chain.presetNames(inOrder: job.processors))
            if !used.isEmpty { names[job.processors] = used }
        }
        return names
    }

    /// Whether `text` holds `preset` in any case (the grammar lowercases words): a chain without
    /// it names no preset, and costs this scan only.
    static func mentionsPreset(_ text: String) -> Bool {
        let word = Array(Chain.presetStep.utf8)
        let bytes = Array(text.utf8)
        guard bytes.count >= word.count else { return false }
        return (0...(bytes.count - word.count)).contains { start in
            word.indices.allSatisfy { bytes[start + $0] | 0x20 == word[$0] }
        }
    }

    /// `jobs` with the presets their chains name (`Job.presets`), from `presets` (what the
    /// database holds of those names; a name it lacks stays missing, and the chain fails with
    /// `unknown preset`).
    static func with(presets: [String: Preset], named: [String: Set<String>], _ jobs: [Job]) -> [Job] {
        jobs.map { job in
            guard let names = named[job.processors] else { return job }
            var job = job
            job.presets = presets.filter { names.contains($0.key) }
            return job
        }
    }

    /// Plans a claimed batch and splits it into groups that share a source, keeping claim order.
    static func groups(of jobs: [Job], maxDataBytes: Int) -> [[JobPlan]] {
        var order: [String] = []
        var byKey: [String: [JobPlan]] = [:]
        var memo = Memo()
        for job in jobs {
            let plan = JobPlan(job, maxDataBytes: maxDataBytes, memo: &memo)
            let key = plan.sharingKey
            if byKey[key] == nil { order.append(key) }
            byKey[key, default: []].append(plan)
        }
        return order.map { byKey[$0] ?? [] }
    }
}

extension JobPlan.Valid {
    /// What the store files a picture set's rung under: the key of the chain that makes that rung
    /// alone (`BreakpointsStep.rungChain`), so that a job asking for it is a hit.
    func rungStoreKey(width: Int, format: FormatStep.Format) throws(HalcyonError) -> String {
        guard let step = chain.chain.breakpoints else { throw HalcyonError(.internal, "a rung of a chain without breakpoints") }
        let rung = try BreakpointsStep.rungChain(before: chain.chain.stepsBeforeBreakpoints, width: width, format: format, of: step)
        return StoreLayout.storeKey(rung.resultKey(cacheKey: cacheKey), scope: scope)
    }
}

extension JobResult {
    /// The result recorded for a job whose output is `object` in the store; `target` is the
    /// chain's `min_score` (a score recorded under it is a target missed).
    init(key: String, object: StoredObject, info: ResultInfo, cacheHit: Bool, source: String?, target: Double?) {
        let score = ResultMeasures.score(info.score)
        self.init(
            key: key, digest: object.digest, path: object.path, bytes: object.bytes,
            width: info.width, height: info.height, format: info.format, cacheHit: cacheHit, source: source,
            facts: info.source, placeholdersJSON: info.placeholdersJSON, quality: info.quality, score: score)
        targetMissed = target.flatMap { target in score.map { $0 < target } }
        chroma = info.chroma
        halfQuality = info.halfQuality
        sourceHash = info.sourceHash
        outputHash = info.outputHash
        sourceVariants = info.sourceVariants
    }

    /// Only the hashes `request` asks for go to the row (a stored result may hold more).
    mutating func keepHashes(_ request: PerceptualHashRequest?) {
        if request == nil { sourceHash = nil }
        if request != .output { outputHash = nil }
        if request != .dihedral { sourceVariants = nil }
    }
}

extension PerceptualHashRequest {
    /// Whether a stored result has every hash this asks for (else the job runs again).
    func isSatisfied(by info: ResultInfo) -> Bool {
        switch self {
        case .source: info.sourceHash != nil
        case .output: info.sourceHash != nil && info.outputHash != nil
        case .dihedral: info.sourceHash != nil && info.sourceVariants != nil
        }
    }
}
