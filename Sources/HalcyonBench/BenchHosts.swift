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
/// shared over the network). With `--host-cpus F`, each host's worker runs in a CPU cgroup of
/// its own capped at F cores (`CPUCgroup`), and X drains with 1, 2 and 4 hosts: the hosts, not
/// this machine's cores, are then the limit. PostgreSQL, the S3 server and the forwarders stay
/// outside every cgroup (only the workers' pids are put in one).
extension Bench {
    /// The hosts, their forwarders and how a worker on each reaches the database and the bucket.
    struct HostsSetup: Sendable {
        let net: NetworkHosts
        let forwarder: TCPForwarder
        /// Host `i`'s CPU cgroup (`--host-cpus`), or none.
        let cgroups: [CPUCgroup]
        /// How many hosts each run drains with.
        let counts: [Int]
        /// The shared services' processes, found by where they listen (PostgreSQL, the S3 server):
        /// what they spend per job tells whether they kept up.
        let services: [SharedService]
        /// The conninfo's keywords other than where the server is (user, dbname, password, …).
        let conninfoRest: String
        let directory: URL

        func conninfo(_ h: NetworkHosts.Host) -> String {
            "host=\(h.rootAddress) port=\(forwarder.port(h.rootAddress, "pg")) \(conninfoRest)"
        }

        func endpoint(_ h: NetworkHosts.Host) -> String { "http://\(h.rootAddress):\(forwarder.port(h.rootAddress, "s3"))" }

        /// Stops the forwarders, removes the hosts (killing what runs on them), then their
        /// cgroups. Safe to call more than once.
        func stop() {
            forwarder.stop()
            net.tearDown()
            for group in cgroups { group.remove() }
        }
    }

    /// How many hosts X's runs drain with: 1 and 2, or with `--host-cpus` 1, 2 and 4.
    var hostCounts: [Int] { hostCPUs == nil ? [1, 2] : [1, 2, 4] }

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
        let net = try NetworkHosts.create(count: hostCounts.max() ?? 2)
        var cgroups: [CPUCgroup] = []
        do {
            if let hostCPUs {
                CPUCgroup.removeStale()
                for h in net.hosts { cgroups.append(try CPUCgroup.create(name: h.name, cores: hostCPUs)) }
            }
            let directory = scratch.appendingPathComponent("hosts-\(getpid())")
            try? FileManager.default.removeItem(at: directory)
            let forwarder = try await TCPForwarder.start(
                listen: net.hosts.map(\.rootAddress), targets: ["pg": pg.target, "s3": "\(s3Host):\(endpoint.port ?? 80)"],
                directory: directory.appendingPathComponent("forwarder"))
            let services = [("PostgreSQL", pg.target), ("S3 server", "\(s3Host):\(endpoint.port ?? 80)")].compactMap { name, target in
                ServiceCPU.listening(on: target).map { SharedService(name: name, cpu: $0) }
            }
            return HostsSetup(
                net: net, forwarder: forwarder, cgroups: cgroups, counts: hostCounts, services: services, conninfoRest: pg.rest,
                directory: directory)
        } catch {
            net.tearDown()
            for group in cgroups { group.remove() }
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
        let groups = Array(setup.cgroups.prefix(hosts))
        let groupsBefore = groups.map { ($0.usageSeconds, $0.throttling) }
        let cpuBefore = MachineCPU.now()
        let forwarderBefore = setup.forwarder.cpuSeconds ?? 0
        let servicesBefore = setup.services.map(\.cpu.seconds)
        let started = Date()
        var pids: [pid_t] = [], logs: [String] = []
        do {
            for (i, h) in chosen.enumerated() {
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
                // Into the host's cgroup at once: the spawned process is still exec'ing setsid,
                // then ip, then halcyon, and starts no work (nor its image process) for tens of
                // milliseconds; `add` also moves anything it started before the move.
                if i < groups.count { try groups[i].add(pids[i]) }
            }
            // Only the hosts are capped: what they share must not be in a host's cgroup.
            let capped = Set(groups.flatMap { $0.pids() })
            let shared = setup.services.map { ($0.name, $0.cpu.pid) } + [("the forwarders", setup.forwarder.pid)]
            if let (name, pid) = shared.first(where: { capped.contains($0.1) }) {
                throw CommandFailure("X: \(name) (pid \(pid)) is in a host's CPU cgroup; the hosts would not be the only ones capped")
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
        let serviceCPU = zip(setup.services, servicesBefore).map { service, before in
            HostsRun.ServiceCPU(name: service.name, cpuSeconds: service.cpu.seconds - before)
        }
        var hostCPU: [HostsRun.HostCPU] = []
        for (group, before) in zip(groups, groupsBefore) {
            var host = HostsRun.HostCPU()
            if let after = group.usageSeconds, let b = before.0 { host.cpuSeconds = after - b }
            if let after = group.throttling, let b = before.1 {
                host.throttledShare = Double(after.throttled - b.throttled) / Double(max(1, after.periods - b.periods))
            }
            hostCPU.append(host)
        }
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
            forwarderCPUSeconds: forwarderCPU, machine: machine, hostCPUs: setup.cgroups.first?.cores, hostCPU: hostCPU, services: serviceCPU)
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

/// A service the hosts share, and its process.
struct SharedService: Sendable {
    var name: String
    var cpu: ServiceCPU
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
    /// Each host's cap in cores (`--host-cpus`), nil when the hosts were not capped.
    var hostCPUs: Double?
    /// What each host's cgroup accounted for, host by host (empty when not capped).
    var hostCPU: [HostCPU] = []
    /// What each shared service (PostgreSQL, the S3 server) spent over the run, where found.
    var services: [ServiceCPU] = []

    struct ServiceCPU {
        var name: String
        var cpuSeconds: Double
    }

    /// The shared services' CPU per job, `name ms`, and the forwarders'.
    var sharedText: String {
        (services.map { String(format: "%@ %.1f", $0.name, $0.cpuSeconds * 1000 / Double(jobs)) }
            + [String(format: "forwarders %.1f", forwarderCPUSeconds * 1000 / Double(jobs))]).joined(separator: ", ")
    }

    struct HostCPU {
        /// CPU seconds the host's cgroup used over the run (nil where nothing accounts for it).
        var cpuSeconds: Double?
        /// The share of scheduler periods in which the host ran out of its quota.
        var throttledShare: Double?
    }

    var jobsPerSecond: Double { Double(jobs) / seconds }

    /// The cores each host used on average, worker start to exit.
    var hostCores: [Double?] { hostCPU.map { $0.cpuSeconds.map { $0 / max(processSeconds, 1e-9) } } }

    var line: String {
        var out = String(
            format: "%d host%@: %d jobs in %.2f s = %.1f jobs/s, workers %.1f CPU ms/job, %@ CPU ms/job, cores %.0f %% busy",
            hosts, hosts == 1 ? "" : "s", jobs, seconds, jobsPerSecond, cpuSeconds * 1000 / Double(jobs), sharedText,
            (machine?.busy ?? 0) * 100)
        if let hostCPUs {
            out += String(format: ", each host capped at %.2f cores used ", hostCPUs) + Self.coresText(hostCores)
            out += String(format: " (throttled in %@ of periods)", Self.sharesText(hostCPU.map(\.throttledShare)))
        }
        return out
    }

    static func coresText(_ cores: [Double?]) -> String {
        cores.map { $0.map { String(format: "%.2f", $0) } ?? "?" }.joined(separator: " ")
    }

    static func sharesText(_ shares: [Double?]) -> String {
        shares.map { $0.map { String(format: "%.0f %%", $0 * 100) } ?? "?" }.joined(separator: ", ")
    }

    /// Median jobs/s of the runs with `hosts` hosts.
    static func rate(_ runs: [HostsRun], hosts: Int) -> Double { median(runs.filter { $0.hosts == hosts }.map(\.jobsPerSecond)) }

    /// `hosts` hosts' throughput against one's (2 by default: JSON's `ratio`).
    static func ratio(_ runs: [HostsRun], hosts: Int = 2) -> Double { rate(runs, hosts: hosts) / max(rate(runs, hosts: 1), 1e-9) }

    /// The host counts the runs drained with, in order.
    static func counts(_ runs: [HostsRun]) -> [Int] { Array(Set(runs.map(\.hosts))).sorted() }

    static func summary(_ runs: [HostsRun], chain: String) -> String {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let counts = counts(runs)
        let cap = runs.first?.hostCPUs
        let hostsText = counts.dropLast().map(String.init).joined(separator: ", ") + (counts.count > 1 ? " and " : "") + "\(counts.last ?? 1)"
        var out = "X — across hosts: W1's jobs (\(chain)) drained by \(hostsText) hosts (network namespaces; PostgreSQL and the S3 store "
        out += "reached over veth links through TCP forwarders"
        if let cap {
            out += String(
                format: "; each host's worker in a CPU cgroup capped at %.2f cores, PostgreSQL, the S3 server and the forwarders outside them", cap)
        }
        out += "), \(runs.first?.jobs ?? 0) jobs (images) per run, median of \(runs.count / max(1, counts.count)) runs\n"
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count + 1), withPad: " ", startingAt: 0) }
        out += "  " + pad("hosts", 7) + pad("images/s (min–max)", 23) + pad("vs 1 host", 11) + pad("worker CPU ms/job", 19) + pad("cores busy", 12)
        out += cap == nil ? "" : pad("cores used per host (throttled)", 34)
        out += "shared pieces' CPU ms/job\n"
        for hosts in counts {
            let mine = runs.filter { $0.hosts == hosts }
            let rates = mine.map(\.jobsPerSecond)
            // The median run's hosts and shared pieces.
            let middle = mine.sorted { $0.jobsPerSecond < $1.jobsPerSecond }[mine.count / 2]
            out += "  " + pad("\(hosts)", 7) + pad(String(format: "%.1f (%.1f–%.1f)", median(rates), rates.min() ?? 0, rates.max() ?? 0), 23)
            out += pad(String(format: "%.2f×", ratio(runs, hosts: hosts)), 11)
            out += pad(String(format: "%.1f", median(mine.map { $0.cpuSeconds * 1000 / Double($0.jobs) })), 19)
            out += pad(String(format: "%.0f %%", median(mine.map { ($0.machine?.busy ?? 0) * 100 })), 12)
            if cap != nil {
                let used = zip(middle.hostCores, middle.hostCPU).map { c, h in
                    (c.map { String(format: "%.2f", $0) } ?? "?") + (h.throttledShare.map { String(format: " (%.0f %%)", $0 * 100) } ?? "")
                }
                out += pad(used.joined(separator: ", "), 34)
            }
            out += middle.sharedText + "\n"
        }
        let oneBusy = median(runs.filter { $0.hosts == 1 }.map { $0.machine?.busy ?? 0 })
        if let cap {
            for hosts in counts where hosts > 1 {
                out += String(format: "  %d hosts against 1: %.2f× (%d × %.2f cores)\n", hosts, ratio(runs, hosts: hosts), hosts, cap)
            }
            let busiest = median(runs.filter { $0.hosts == counts.last }.map { $0.machine?.busy ?? 0 })
            let used = runs.flatMap { $0.hostCores.compactMap { $0 } }
            if let least = used.min(), let most = used.max() {
                out += String(
                    format: "  each host used %.2f–%.2f of its %.2f cores (this machine's %d cores %.0f %% busy at %d hosts, whatever ran): ", least,
                    most, cap, cores, busiest * 100, counts.last ?? 0)
                out +=
                    least >= 0.9 * cap
                    ? "the hosts' caps were the limit\n"
                    : "a host used less than 90 % of its cap: something shared (this machine's cores, the queue, the bucket) held it back\n"
            }
        } else {
            out += String(format: "  2 hosts against 1: %.2f×", ratio(runs))
            if oneBusy >= 0.85 {
                out += String(
                    format: " — both hosts share this machine's %d cores, which one host already keeps %.0f %% busy: CPU-bound, so about 1× "
                        + "here; on machines of their own, each host adds its cores (--host-cpus caps each host to show it)\n", cores,
                    oneBusy * 100)
            } else {
                out += String(
                    format: " — both hosts share this machine's %d cores (%.0f %% busy with one host): a second host adds only the idle share\n",
                    cores, oneBusy * 100)
            }
        }
        return out
    }

    static func json(_ runs: [HostsRun]) -> JSONValue {
        func rounded(_ v: Double, _ scale: Double) -> JSONValue { .number((v * scale).rounded() / scale) }
        var o: [String: JSONValue] = [
            "jobs": .number(Double(runs.first?.jobs ?? 0)),
            "cores": .number(Double(ProcessInfo.processInfo.activeProcessorCount)),
            "one_host_jobs_per_second_median": rounded(rate(runs, hosts: 1), 10),
            "two_hosts_jobs_per_second_median": rounded(rate(runs, hosts: 2), 10),
            "ratio": rounded(ratio(runs), 100),
            "host_cpus": runs.first?.hostCPUs.map { .number($0) } ?? .null,
            "runs": .array(
                runs.map { r in
                    var run: [String: JSONValue] = [
                        "hosts": .number(Double(r.hosts)), "jobs": .number(Double(r.jobs)),
                        "seconds": rounded(r.seconds, 1000),
                        "process_seconds": rounded(r.processSeconds, 1000),
                        "cpu_seconds": rounded(r.cpuSeconds, 1000),
                        "forwarder_cpu_seconds": rounded(r.forwarderCPUSeconds, 1000),
                        "service_cpu_seconds": .object(Dictionary(uniqueKeysWithValues: r.services.map { ($0.name, rounded($0.cpuSeconds, 1000)) })),
                        "machine_busy": r.machine.map { rounded($0.busy, 1000) } ?? .null,
                    ]
                    if r.hostCPUs != nil {
                        run["host_cpu_seconds"] = .array(r.hostCPU.map { $0.cpuSeconds.map { rounded($0, 1000) } ?? .null })
                        run["host_throttled_share"] = .array(r.hostCPU.map { $0.throttledShare.map { rounded($0, 1000) } ?? .null })
                    }
                    return .object(run)
                }),
        ]
        if runs.contains(where: { $0.hosts == 4 }) {
            o["four_hosts_jobs_per_second_median"] = rounded(rate(runs, hosts: 4), 10)
            o["ratio_4"] = rounded(ratio(runs, hosts: 4), 100)
        }
        return .object(o)
    }
}
