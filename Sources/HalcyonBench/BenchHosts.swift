import Foundation
import HalcyonCLI
import HalcyonEmbedded
import HalcyonHosts
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonStore

/// X (across hosts): W1's jobs, copied, drained by one host's worker and then by two hosts'
/// workers at once, each host a Linux network namespace (`NetworkHosts`) that reaches
/// PostgreSQL and the S3 server only over its veth link, through `TCPForwarder`s on the root
/// side; the store is the `--object-store` bucket, shared by nothing else. Sources are W1's
/// `file://` corpus (the namespaces share the filesystem; the store and the queue are what is
/// shared over the network).
extension Bench {
    /// The hosts, their forwarders and how a worker on each reaches the database and the bucket.
    struct HostsSetup {
        let net: NetworkHosts
        let forwarder: TCPForwarder
        /// The conninfo's keywords other than where the server is (user, dbname, password, …).
        let conninfoRest: String
        let directory: URL

        func conninfo(_ h: NetworkHosts.Host) -> String {
            "host=\(h.rootAddress) port=\(forwarder.port(h.rootAddress, "pg")) \(conninfoRest)"
        }

        func endpoint(_ h: NetworkHosts.Host) -> String { "http://\(h.rootAddress):\(forwarder.port(h.rootAddress, "s3"))" }

        func stop() {
            forwarder.stop()
            net.tearDown()
        }
    }

    /// Hosts X runs on (one, then both).
    static let hostCount = 2

    /// Why X cannot run here, or nil. `conninfo` is the bench's database.
    func acrossHostsUnavailable(conninfo: String) -> String? {
        guard let objectStore else { return "needs --object-store s3://BUCKET[/PREFIX] (the hosts share the store only through it)" }
        if let reason = NetworkHosts.unavailableReason { return reason }
        if let reason = TCPForwarder.unavailableReason { return reason }
        guard case .objectStore(let configuration)? = try? StoreLocation(parsing: objectStore) else { return "--object-store is not s3://…" }
        guard let endpoint = configuration.endpoint, endpoint.scheme == "http", endpoint.host != nil else {
            return "needs an http:// S3 endpoint in the root namespace (AWS_ENDPOINT_URL_S3): the hosts reach nothing else"
        }
        guard Self.postgresTarget(conninfo) != nil else { return "cannot tell where the database listens from its conninfo" }
        return nil
    }

    /// Makes the hosts and starts the forwarders to PostgreSQL and the S3 endpoint on their links.
    func startHosts(conninfo: String, scratch: URL) async throws -> HostsSetup {
        guard let objectStore, case .objectStore(let configuration) = try StoreLocation(parsing: objectStore),
            let endpoint = configuration.endpoint, let s3Host = endpoint.host, let pg = Self.postgresTarget(conninfo)
        else { throw CommandFailure("X: \(acrossHostsUnavailable(conninfo: conninfo) ?? "cannot run")") }
        let net = try NetworkHosts.create(count: Self.hostCount)
        do {
            let directory = scratch.appendingPathComponent("hosts-\(getpid())")
            try? FileManager.default.removeItem(at: directory)
            let forwarder = try await TCPForwarder.start(
                listen: net.hosts.map(\.rootAddress), targets: ["pg": pg.target, "s3": "\(s3Host):\(endpoint.port ?? 80)"],
                directory: directory.appendingPathComponent("forwarder"))
            return HostsSetup(net: net, forwarder: forwarder, conninfoRest: pg.rest, directory: directory)
        } catch {
            net.tearDown()
            throw error
        }
    }

    /// One X run: W1's corpus jobs, `copies` times (copy after copy, so that no claim holds two
    /// copies of a source as siblings), drained by workers on the first `hosts` hosts at once.
    func runAcrossHosts(
        _ corpus: BenchCorpus, setup: HostsSetup, hosts: Int, copies: Int, conninfo: String, scratch: URL, round: Int
    ) async throws -> HostsRun {
        guard let objectStore else { throw CommandFailure("X needs --object-store") }
        let bucket = "\(objectStore)/bench-\(getpid())-x\(round)-\(hosts)"
        return try await Self.emptyingAfter(bucket) {
            try await drainAcrossHosts(corpus, setup: setup, hosts: hosts, copies: copies, conninfo: conninfo, bucket: bucket)
        }
    }

    private func drainAcrossHosts(
        _ corpus: BenchCorpus, setup: HostsSetup, hosts: Int, copies: Int, conninfo: String, bucket: String
    ) async throws -> HostsRun {
        let c = try await PGConnection.connect(conninfo)
        defer { Task { await c.close() } }
        try await Self.ensureOnlyBenchJobs(c)
        try await c.run(BenchSQL.DeleteBenchJobs())
        try await c.run(BenchSQL.DeleteBenchWorkers())
        let prefix = "halcyon-bench:x-"
        _ = try await JobQueue(connection: c).enqueue(
            batch: (0..<copies).flatMap { copy in
                corpus.files.map { f in
                    var j = JobQueue.NewJob(source: "file://" + f.path)
                    j.processors = Self.chain
                    j.cacheKey = prefix + "\(copy)-" + URL(fileURLWithPath: f.path).lastPathComponent
                    return j
                }
            })
        let chosen = Array(setup.net.hosts.prefix(hosts))
        let cpuBefore = MachineCPU.now()
        let forwarderBefore = setup.forwarder.cpuSeconds ?? 0
        let started = Date()
        var pids: [pid_t] = [], logs: [String] = []
        do {
            for h in chosen {
                let home = setup.directory.appendingPathComponent("home-\(h.name)")
                let tmp = home.appendingPathComponent("tmp")
                try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
                var environment = ProcessInfo.processInfo.environment
                environment["HALCYON_HOME"] = home.path
                environment["TMPDIR"] = tmp.path
                environment["AWS_ENDPOINT_URL_S3"] = setup.endpoint(h)
                let log = setup.directory.appendingPathComponent("worker-\(h.name).log").path
                try? FileManager.default.removeItem(atPath: log)
                let launch = setup.net.launcher(on: h, workerExecutable)
                pids.append(
                    try Subprocess.spawn(
                        launch.executable,
                        launch.arguments + [
                            "work", "--drain", "--database-url", setup.conninfo(h), "--store", bucket, "--file-root", corpus.directory.path,
                            "--log-level", "warning", "--worker-id", "halcyon-bench-\(getpid())-\(h.name)", "--no-progress",
                            "--sweep-interval", "0s",
                        ] + (workerConcurrency.map { ["--concurrency", String($0)] } ?? []), outputPath: log, environment: environment))
                logs.append(log)
            }
        } catch {
            for pid in pids { kill(-pid, SIGKILL) }
            for pid in pids { _ = Subprocess.status(of: pid, block: true) }
            throw error
        }
        // Each worker waited for off the cooperative pool; a failure kills the other host's.
        let usages = try await withThrowingTaskGroup(of: Subprocess.Usage.self) { group in
            for pid in pids { group.addTask { try await Blocking.run { Subprocess.waitWithUsage(pid, sampleInterval: 0.1) } } }
            var out: [Subprocess.Usage] = []
            for try await usage in group {
                if usage.status != 0 { for pid in pids { kill(-pid, SIGKILL) } }
                out.append(usage)
            }
            return out
        }
        let seconds = Date().timeIntervalSince(started)
        let machine = MachineCPU.now().flatMap { cpuBefore?.shares(until: $0) }
        let forwarderCPU = (setup.forwarder.cpuSeconds ?? 0) - forwarderBefore
        if let failed = usages.first(where: { $0.status != 0 }) {
            throw CommandFailure("X: a host's worker exited \(failed.status); see \(logs.joined(separator: ", "))")
        }
        let jobs = corpus.files.count * copies
        let r = try await c.row(BenchSQL.HostsDrain(keyPattern: prefix + "%"))
        guard let r, r.ok == jobs, let drain = r.drain, drain > 0 else {
            throw CommandFailure("X: only \(r?.ok ?? 0) of \(jobs) outputs are 320×320 JPEGs; see \(logs.joined(separator: ", "))")
        }
        try await c.run(BenchSQL.DeleteBenchJobs())
        return HostsRun(
            hosts: hosts, jobs: jobs, seconds: drain, processSeconds: seconds, cpuSeconds: usages.map(\.cpuSeconds).reduce(0, +),
            forwarderCPUSeconds: forwarderCPU, machine: machine)
    }

    /// Where PostgreSQL listens, as a forwarder's target (`unix:/dir/.s.PGSQL.PORT` or
    /// `HOST:PORT`), and the conninfo's other keywords (`key='value' …`); nil when `conninfo`
    /// (keywords or a `postgresql://` URL) names several hosts or cannot be read.
    static func postgresTarget(_ conninfo: String) -> (target: String, rest: String)? {
        guard var fields = conninfoFields(conninfo) else { return nil }
        let host = fields.removeValue(forKey: "host") ?? "/var/run/postgresql"
        let hostaddr = fields.removeValue(forKey: "hostaddr")
        let port = fields.removeValue(forKey: "port") ?? "5432"
        guard !host.contains(","), !port.contains(","), Int(port) != nil else { return nil }
        let target = host.hasPrefix("/") ? "unix:\(host)/.s.PGSQL.\(port)" : "\(hostaddr ?? host):\(port)"
        func quoted(_ v: String) -> String { "'" + v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'" }
        let rest = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\(quoted($0.value))" }
        return (target, (rest + (fields["connect_timeout"] == nil ? ["connect_timeout=10"] : [])).joined(separator: " "))
    }

    /// A conninfo's keywords: `key=value` pairs (values optionally single-quoted, with `\`
    /// escapes) or a `postgresql://user:password@host:port/dbname?key=value` URL.
    static func conninfoFields(_ conninfo: String) -> [String: String]? {
        let text = conninfo.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") {
            guard let u = URLComponents(string: text) else { return nil }
            var f: [String: String] = [:]
            if let h = u.host, !h.isEmpty { f["host"] = h }
            if let p = u.port { f["port"] = String(p) }
            if let user = u.user { f["user"] = user }
            if let password = u.password { f["password"] = password }
            let db = String(u.path.dropFirst())
            if !db.isEmpty { f["dbname"] = db }
            for item in u.queryItems ?? [] { f[item.name] = item.value ?? "" }
            return f
        }
        var f: [String: String] = [:]
        var i = text.startIndex
        func skipSpaces() { while i < text.endIndex, text[i].isWhitespace { i = text.index(after: i) } }
        while true {
            skipSpaces()
            guard i < text.endIndex else { return f }
            var key = ""
            while i < text.endIndex, text[i] != "=", !text[i].isWhitespace {
                key.append(text[i])
                i = text.index(after: i)
            }
            skipSpaces()
            guard i < text.endIndex, text[i] == "=" else { return nil }
            i = text.index(after: i)
            skipSpaces()
            var value = ""
            if i < text.endIndex, text[i] == "'" {
                i = text.index(after: i)
                while i < text.endIndex, text[i] != "'" {
                    if text[i] == "\\" { i = text.index(after: i) }
                    guard i < text.endIndex else { return nil }
                    value.append(text[i])
                    i = text.index(after: i)
                }
                guard i < text.endIndex else { return nil }
                i = text.index(after: i)
            } else {
                while i < text.endIndex, !text[i].isWhitespace {
                    if text[i] == "\\" { i = text.index(after: i) }
                    guard i < text.endIndex else { break }
                    value.append(text[i])
                    i = text.index(after: i)
                }
            }
            f[key] = value
        }
    }

    /// How many copies of the corpus X drains per run: about 1,000 jobs at --scale 1 (W1 runs at
    /// 45–90 jobs/s on 2 cores, so a run lasts 10 s or more), never fewer than the corpus.
    func acrossHostsCopies(_ corpus: BenchCorpus) -> Int {
        max(1, Int((1000 * scale / Double(max(1, corpus.files.count))).rounded()))
    }
}

/// One X run: `hosts` hosts' workers draining `jobs` jobs.
struct HostsRun {
    var hosts: Int
    var jobs: Int
    /// First claim to last completion (the database's clock).
    var seconds: Double
    /// Starting the workers to the last one's exit.
    var processSeconds: Double
    /// The workers' CPU (every host's, with their image processes).
    var cpuSeconds: Double
    /// The forwarders' CPU over the run (the root namespace's side of every connection).
    var forwarderCPUSeconds: Double
    /// The whole machine's cores over the run.
    var machine: MachineShare?

    var jobsPerSecond: Double { Double(jobs) / seconds }

    var line: String {
        String(
            format: "%d host%@: %d jobs in %.2f s = %.1f jobs/s, workers %.1f CPU ms/job, forwarders %.1f CPU ms/job, cores %.0f %% busy",
            hosts, hosts == 1 ? "" : "s", jobs, seconds, jobsPerSecond, cpuSeconds * 1000 / Double(jobs),
            forwarderCPUSeconds * 1000 / Double(jobs), (machine?.busy ?? 0) * 100)
    }

    /// Median jobs/s of the runs with `hosts` hosts.
    static func rate(_ runs: [HostsRun], hosts: Int) -> Double { median(runs.filter { $0.hosts == hosts }.map(\.jobsPerSecond)) }

    /// Two hosts' throughput against one's.
    static func ratio(_ runs: [HostsRun]) -> Double { rate(runs, hosts: 2) / max(rate(runs, hosts: 1), 1e-9) }

    static func summary(_ runs: [HostsRun], chain: String) -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var out = "X — across hosts: W1's jobs (\(chain)) drained by 1 and by 2 hosts (network namespaces; PostgreSQL and the S3 store "
        out += "reached over veth links through TCP forwarders), \(runs.first?.jobs ?? 0) jobs per run, median of \(runs.count / 2) runs\n"
        out += "  hosts   jobs/s (min–max)          worker CPU ms/job   forwarder CPU ms/job   cores busy\n"
        for hosts in 1...2 {
            let mine = runs.filter { $0.hosts == hosts }
            let rates = mine.map(\.jobsPerSecond)
            guard !rates.isEmpty else { continue }
            out += String(
                format: "  %d       %6.1f (%.1f–%.1f)%@ %8.1f            %8.1f             %5.0f %%\n", hosts, median(rates), rates.min() ?? 0,
                rates.max() ?? 0, String(repeating: " ", count: 10), median(mine.map { $0.cpuSeconds * 1000 / Double($0.jobs) }),
                median(mine.map { $0.forwarderCPUSeconds * 1000 / Double($0.jobs) }), median(mine.map { ($0.machine?.busy ?? 0) * 100 }))
        }
        let oneBusy = median(runs.filter { $0.hosts == 1 }.map { $0.machine?.busy ?? 0 })
        out += String(format: "  2 hosts against 1: %.2f×", ratio(runs))
        if oneBusy >= 0.85 {
            out += String(
                format: " — both hosts share this machine's %d cores, which one host already keeps %.0f %% busy: CPU-bound, so about 1× "
                    + "here; on machines of their own, each host adds its cores\n", cores, oneBusy * 100)
        } else {
            out += String(
                format: " — both hosts share this machine's %d cores (%.0f %% busy with one host): a second host adds only the idle share\n",
                cores, oneBusy * 100)
        }
        return out
    }

    static func json(_ runs: [HostsRun]) -> JSONValue {
        [
            "jobs": .number(Double(runs.first?.jobs ?? 0)),
            "cores": .number(Double(ProcessInfo.processInfo.activeProcessorCount)),
            "one_host_jobs_per_second_median": .number((rate(runs, hosts: 1) * 10).rounded() / 10),
            "two_hosts_jobs_per_second_median": .number((rate(runs, hosts: 2) * 10).rounded() / 10),
            "ratio": .number((ratio(runs) * 100).rounded() / 100),
            "runs": .array(
                runs.map {
                    [
                        "hosts": .number(Double($0.hosts)), "jobs": .number(Double($0.jobs)),
                        "seconds": .number(($0.seconds * 1000).rounded() / 1000),
                        "process_seconds": .number(($0.processSeconds * 1000).rounded() / 1000),
                        "cpu_seconds": .number(($0.cpuSeconds * 1000).rounded() / 1000),
                        "forwarder_cpu_seconds": .number(($0.forwarderCPUSeconds * 1000).rounded() / 1000),
                        "machine_busy": $0.machine.map { .number(($0.busy * 1000).rounded() / 1000) } ?? .null,
                    ]
                }),
        ]
    }
}
