import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonChain
import HalcyonDomain
import HalcyonFetch
import HalcyonQueue
import HalcyonRuntime

struct Enqueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Enqueue one job, or many from JSON lines; prints the new ids.",
        discussion: """
            One job:   halcyon enqueue https://example.com/a.jpg --processors 'resize(320x320, mode=fill) |> format(webp)'

            Many jobs: halcyon enqueue --file jobs.jsonl (or --file - for standard input).

            Each line is an object with "source" and optionally "processors", "cache_key", \
            "fallback_sources", "options", "priority", "max_attempts", "run_at", "queue", \
            "unique_key", "tags", "fair_key", "traceparent", "tracestate". The batch is checked first and \
            inserted in one transaction: one bad line enqueues nothing.

            Unique keys: while a job with the same --unique-key is queued or running, its id is \
            printed instead of a new one (standard error says which lines were duplicates).

            Fair keys: within a queue and priority, workers take jobs round-robin between the \
            --fair-key values that have jobs waiting (jobs without one share one turn), so one \
            key's backlog does not hold up another key's jobs.

            Trace context: --traceparent (and --tracestate) carry the W3C Trace Context of the \
            request that enqueues the job; the worker's log lines about its claim, outcome and \
            webhook deliveries carry its trace id (trace_id).

            --wait: then wait for the jobs as `halcyon wait` does (same exit codes: 0 all \
            succeeded, 1 some failed or were cancelled, 2 timeout).
            """)

    @OptionGroup var database: DatabaseOptions
    @Argument(help: "The source: http(s)://…, file:///… or data:…")
    var source: String?
    @Option(name: .customLong("fallback"), help: "A fallback source, tried in order after the source fails (repeatable).")
    var fallbacks: [String] = []
    @Option(help: "The processor chain, e.g. 'resize(320x320, mode=fill) |> format(jpeg, quality=82)'.")
    var processors: String = ""
    @Option(help: "Cache key of the source (default: the source URL).")
    var cacheKey: String?
    @Option(help: "Higher runs first.")
    var priority: Int = 0
    @Option(help: "Attempts before the job fails for good.")
    var maxAttempts: Int = Job.defaultMaxAttempts
    @Option(help: "Do not run before this ISO-8601 instant.")
    var runAt: String?
    @Option(name: .customLong("option"), help: "An options entry key=value; the value is read as JSON when it parses, else as a string (repeatable).")
    var optionPairs: [String] = []
    @Option(help: "The named queue (default: default).")
    var queue: String = QueueName.default
    @Option(
        help: ArgumentHelp(
            "While a job with this key is queued or running, return its id instead of enqueueing (at most \(JobQueue.NewJob.uniqueKeyBytes.upperBound) bytes)."
        ))
    var uniqueKey: String?
    @Option(
        name: .customLong("tag"),
        help: ArgumentHelp("A tag to find the job by (repeatable; at most \(JobTags.maxCount), each 1–\(JobTags.maxBytes) bytes)."))
    var tags: [String] = []
    @Option(
        help: ArgumentHelp(
            "The share of its queue the job is taken from, e.g. a tenant (1–\(FairKey.maxBytes) bytes; default: the queue's common share)."))
    var fairKey: String?
    @Option(
        help: ArgumentHelp(
            "The W3C traceparent of the request that enqueues the job: 00-<32 hex digits: trace id>-<16 hex digits: parent id>-<2 hex digits: flags>."
        ))
    var traceparent: String?
    @Option(help: ArgumentHelp("The W3C tracestate that goes with --traceparent (key=value members separated by commas)."))
    var tracestate: String?
    @Option(help: "Enqueue every line of this JSON-lines file ('-' for standard input).")
    var file: String?
    @Flag(help: "Wait until the jobs are finished (see `halcyon wait`).")
    var wait = false
    @OptionGroup var waiting: WaitOptions

    func validate() throws {
        if (source == nil) == (file == nil) { throw ValidationError("give either a SOURCE or --file") }
        let jobOptions = !fallbacks.isEmpty || !processors.isEmpty || cacheKey != nil || !optionPairs.isEmpty || uniqueKey != nil || !tags.isEmpty
        if file != nil && (jobOptions || fairKey != nil || traceparent != nil || tracestate != nil) {
            throw ValidationError("--file takes every field from its lines; drop the other job options")
        }
    }

    func run() async throws {
        var jobs: [JobQueue.NewJob] = []
        var lineNumbers: [Int] = []
        if let file {
            let lines = try readLines(file)
            jobs = lines.map(\.job)
            lineNumbers = lines.map(\.line)
        } else if let source {
            var job = JobQueue.NewJob(source: source)
            job.fallbackSources = fallbacks
            job.processors = processors
            job.cacheKey = cacheKey
            job.priority = priority
            job.maxAttempts = maxAttempts
            job.runAt = runAt
            job.queue = queue
            job.uniqueKey = uniqueKey
            job.tags = tags
            job.fairKey = fairKey
            job.trace = try traceContext(traceparent, tracestate, where: "--")
            var options: [String: JSONValue] = [:]
            for pair in optionPairs {
                guard let eq = pair.firstIndex(of: "=") else { throw ValidationError("--option needs key=value, got '\(pair)'") }
                let value = String(pair[pair.index(after: eq)...])
                options[String(pair[..<eq])] = JSONValue.parse(value) ?? .string(value)
            }
            job.options = JSONValue.object(options).jsonText
            try check(job, where: "")
            jobs = [job]
        }
        guard !jobs.isEmpty else { throw CommandFailure("nothing to enqueue") }
        if wait, jobs.count > WaitOptions.maxJobs {
            throw CommandFailure("--wait waits for at most \(WaitOptions.maxJobs) jobs; enqueue \(jobs.count) without it and wait for them in parts")
        }
        let (connection, conninfo) = try await database.connect()
        let queue = JobQueue(connection: connection)
        let enqueued = jobs.count == 1 ? [try await queue.enqueue(jobs[0])] : try await queue.enqueue(batch: jobs)
        await connection.close()
        let ids = enqueued.map(\.id)
        if ids.count <= 20 {
            ids.forEach { print($0) }
        } else {
            print("enqueued \(enqueued.count { $0.inserted }) jobs: ids \(ids.first!)…\(ids.last!)")
        }
        let duplicates = enqueued.indices.filter { !enqueued[$0].inserted }
        for i in duplicates.prefix(100) {
            let at = file == nil ? "" : "line \(lineNumbers[i]): "
            printError(
                "\(at)duplicate: unique_key '\(jobs[i].uniqueKey ?? "")' is held by job \(enqueued[i].id) (queued or running); not enqueued again")
        }
        if duplicates.count > 100 { printError("… and \(duplicates.count - 100) more duplicates") }
        if wait {
            fflush(nil)
            var seen = Set<Int64>()
            throw ExitCode(try await waiting.wait(for: ids.filter { seen.insert($0).inserted }, conninfo: conninfo, database: database.described))
        }
    }

    /// Rejects what the worker would reject, before it reaches the table.
    private func check(_ job: JobQueue.NewJob, where context: String) throws {
        do {
            for s in [job.source] + job.fallbackSources { _ = try Source.parse(s) }
            // Presets are the worker's to expand (it reads them with the claim): here they only
            // have to be well-formed.
            let presets = Chain.presetNames(inOrder: job.processors).map { ($0, "") }
            let chain = try Chain.parse(job.processors, presets: Dictionary(presets, uniquingKeysWith: { a, _ in a }))
            try SourceReference.checkWatermarks(chain.watermarkSources)
            _ = try JobOptions.parse(json: job.options)
            guard (1...Int(Int32.max)).contains(job.maxAttempts) else {
                throw HalcyonError(.invalidOptions, "max_attempts must be from 1 to \(Int32.max)")
            }
            guard (-32768...32767).contains(job.priority) else { throw HalcyonError(.invalidOptions, "priority must fit in a smallint") }
            if let r = job.runAt, ISO8601.parse(r) == nil { throw HalcyonError(.invalidOptions, "run_at must be an ISO-8601 instant") }
            if let problem = QueueName.problem(job.queue) { throw HalcyonError(.invalidOptions, problem) }
            let keyBytes = JobQueue.NewJob.uniqueKeyBytes
            if let key = job.uniqueKey, !keyBytes.contains(key.utf8.count) {
                throw HalcyonError(.invalidOptions, "unique_key must have \(keyBytes.lowerBound) to \(keyBytes.upperBound) bytes")
            }
            if let problem = JobTags.problem(job.tags) { throw HalcyonError(.invalidOptions, problem) }
            if let key = job.fairKey, let problem = FairKey.problem(key) { throw HalcyonError(.invalidOptions, problem) }
        } catch let error as HalcyonError {
            throw CommandFailure("\(context)\(error)")
        }
    }

    /// The trace context of a job, checked as the table checks it (`TraceContext`); nil without
    /// a traceparent. `context` prefixes the error: where the values came from (`--` for the
    /// options, so that it names `--traceparent`; `line N: ` for a JSON line).
    private func traceContext(_ traceparent: String?, _ tracestate: String?, where context: String) throws -> TraceContext? {
        if let problem = TraceContext.problem(traceparent: traceparent, tracestate: tracestate) {
            throw CommandFailure("\(context)\(problem)")
        }
        return try traceparent.map { p throws in try TraceContext(traceparent: p, tracestate: tracestate) }
    }

    /// The jobs of a JSON-lines file, each with its line number.
    private func readLines(_ path: String) throws -> [(line: Int, job: JobQueue.NewJob)] {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let d = FileManager.default.contents(atPath: path) else { throw CommandFailure("cannot read \(path)") }
            data = d
        }
        var jobs: [(line: Int, job: JobQueue.NewJob)] = []
        for (index, line) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            let at = "line \(index + 1): "
            guard case .object(let o)? = JSONValue.parse(text) else { throw CommandFailure("\(at)not a JSON object") }
            let known: Set<String> = [
                "source", "processors", "cache_key", "fallback_sources", "options", "priority", "max_attempts", "run_at", "queue",
                "unique_key", "tags", "fair_key", "traceparent", "tracestate",
            ]
            if let unknown = o.keys.sorted().first(where: { !known.contains($0) }) { throw CommandFailure("\(at)unknown field '\(unknown)'") }
            guard let source = o["source"]?.stringValue else { throw CommandFailure("\(at)\"source\" (a string) is required") }
            var job = JobQueue.NewJob(source: source)
            if let v = o["processors"] {
                guard let s = v.stringValue else { throw CommandFailure("\(at)\"processors\" must be a string") }; job.processors = s
            }
            if let v = o["cache_key"], v != .null {
                guard let s = v.stringValue else { throw CommandFailure("\(at)\"cache_key\" must be a string") }; job.cacheKey = s
            }
            if let v = o["fallback_sources"] {
                guard let a = v.arrayValue, a.allSatisfy({ $0.stringValue != nil }) else {
                    throw CommandFailure("\(at)\"fallback_sources\" must be an array of strings")
                }
                job.fallbackSources = a.compactMap(\.stringValue)
            }
            if let v = o["options"] {
                guard case .object = v else { throw CommandFailure("\(at)\"options\" must be an object") }; job.options = v.jsonText
            }
            if let v = o["priority"] {
                guard let n = v.numberValue, n == n.rounded(), (-32768...32767).contains(n) else {
                    throw CommandFailure("\(at)\"priority\" must be an integer from -32768 to 32767")
                }
                job.priority = Int(n)
            }
            if let v = o["max_attempts"] {
                guard let n = v.numberValue, n == n.rounded(), (1...Double(Int32.max)).contains(n) else {
                    throw CommandFailure("\(at)\"max_attempts\" must be an integer from 1 to \(Int32.max)")
                }
                job.maxAttempts = Int(n)
            }
            if let v = o["run_at"] { guard let s = v.stringValue else { throw CommandFailure("\(at)\"run_at\" must be a string") }; job.runAt = s }
            if let v = o["queue"] { guard let s = v.stringValue else { throw CommandFailure("\(at)\"queue\" must be a string") }; job.queue = s }
            if let v = o["unique_key"], v != .null {
                guard let s = v.stringValue else { throw CommandFailure("\(at)\"unique_key\" must be a string") }; job.uniqueKey = s
            }
            if let v = o["tags"] {
                guard let a = v.arrayValue, a.allSatisfy({ $0.stringValue != nil }) else {
                    throw CommandFailure("\(at)\"tags\" must be an array of strings")
                }
                job.tags = a.compactMap(\.stringValue)
            }
            if let v = o["fair_key"], v != .null {
                guard let s = v.stringValue else { throw CommandFailure("\(at)\"fair_key\" must be a string") }; job.fairKey = s
            }
            var trace: [String?] = [nil, nil]
            for (i, key) in ["traceparent", "tracestate"].enumerated() {
                if let v = o[key], v != .null {
                    guard let s = v.stringValue else { throw CommandFailure("\(at)\"\(key)\" must be a string") }; trace[i] = s
                }
            }
            job.trace = try traceContext(trace[0], trace[1], where: at)
            try check(job, where: at)
            jobs.append((index + 1, job))
        }
        return jobs
    }
}
