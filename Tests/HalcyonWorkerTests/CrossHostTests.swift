import Foundation
import HalcyonHosts
import HalcyonQueue
import HalcyonRuntime
import HalcyonS3
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The S3 store across hosts: two "hosts" as Linux network namespaces, each joined to the root
/// namespace by a veth pair, sharing nothing but PostgreSQL and the S3 server — both reached
/// over that network (TCP forwarders on the root-side addresses), as is the origin. Each host's
/// worker has its own `HALCYON_HOME` and temp directory; the store is `--store s3://…` only.
/// One host is SIGKILLed mid-drain (its whole process group, as a host dying); the other
/// drains the rest, its jobs included once their leases end.
// Two workers keep both cores busy for the whole drain: three process slots.
@Suite(
    .enabled(if: TestEnvironment.available && TestEnvironment.s3Available, "needs scripts/test (PostgreSQL, origin, SeaweedFS)"),
    .enabled(if: NetworkHosts.unavailableReason == nil, Comment(rawValue: NetworkHosts.unavailableReason ?? "")),
    .processes(3))
struct CrossHostTests {
    static let jobs = 2000
    /// Distinct result keys: jobs past this many repeat the first keys (enqueued 1,600 ids later).
    static let keys = 1600
    static let colours = 40
    static let sizes = [2, 3, 4, 5, 6]

    /// Job `i`'s source and chain. Keys `k` and `k + 40·5·m` have the same colour and size, so
    /// the same bytes: 200 objects, each the result of 8 keys with different URLs, which the
    /// two hosts race to write.
    static func job(_ i: Int, tag: String, origin: String) -> JobQueue.NewJob {
        let k = i % keys
        var j = JobQueue.NewJob(source: "\(origin)/files/crosshost-\(k % colours).png?t=\(tag)&k=\(k)")
        let n = sizes[(k / colours) % sizes.count]
        j.processors = "resize(\(n)x\(n)) |> format(png)"
        return j
    }

    /// The PostgreSQL socket `scripts/test` gave: `host=DIR port=P` of the admin conninfo.
    static func postgresSocket() throws -> (path: String, rest: String) {
        var fields: [String: String] = [:]
        for pair in TestEnvironment.adminConninfo.split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { fields[kv[0]] = kv[1] }
        }
        let dir = try #require(fields["host"]), port = fields["port"] ?? "5432"
        return ("\(dir)/.s.PGSQL.\(port)", "user=\(fields["user"] ?? "postgres")")
    }

    static func hostPort(_ url: String) throws -> String {
        let u = try #require(URL(string: url))
        return "\(try #require(u.host)):\(try #require(u.port))"
    }

    @Test func twoHostsShareOnlyTheDatabaseAndTheBucketAndOneDies() async throws {
        let net = try NetworkHosts.create(count: 2)
        defer { net.tearDown() }
        let (a, b) = (net.hosts[0], net.hosts[1])
        let socket = try Self.postgresSocket()
        let forwarder = try await TCPForwarder.start(
            listen: net.hosts.map(\.rootAddress),
            targets: [
                "pg": "unix:\(socket.path)", "s3": try Self.hostPort(TestEnvironment.s3Endpoint),
                "origin": try Self.hostPort(TestEnvironment.origin),
            ])
        defer { forwarder.stop() }

        let db = try await TestDatabase.create()
        let tag = db.name
        let c = try await db.connect()
        defer { Task { await c.close() } }
        // Every write of `succeeded` is recorded with the worker that held the job: a job that
        // succeeded twice would have two rows.
        try await c.executeScript(
            """
            CREATE TABLE public.outcomes (job_id bigint, worker text, attempt int, cache_hit boolean, at timestamptz);
            CREATE FUNCTION public.record_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO public.outcomes VALUES (NEW.id, OLD.locked_by, NEW.attempt, NEW.cache_hit, clock_timestamp());
                RETURN NULL;
            END $$;
            CREATE TRIGGER record_outcome AFTER UPDATE OF state ON halcyon.jobs
                FOR EACH ROW WHEN (NEW.state = 'succeeded') EXECUTE FUNCTION public.record_outcome();
            """)
        for colour in 0..<Self.colours {
            try Origin.publish(
                "crosshost-\(colour).png",
                try SampleImages.solid(width: 8, height: 8, red: UInt8(colour * 6), green: UInt8(255 - colour * 5), blue: 90))
        }
        // One URL in the rows for both hosts: the origin at host a's root-side address, which b
        // reaches through its own link (NetworkHosts routes the /24 through each host's pair).
        let origin = "http://\(a.rootAddress):\(forwarder.port(a.rootAddress, "origin"))"
        _ = try await JobQueue(connection: c).enqueue(batch: (0..<Self.jobs).map { Self.job($0, tag: tag, origin: origin) })
        let store = TestEnvironment.s3StoreURL(prefix: "crosshost-\(tag)")

        func environment(_ h: NetworkHosts.Host) throws -> [String: String] {
            let home = try TestEnvironment.temporaryDirectory("home-\(h.name)")
            let tmp = home.appendingPathComponent("tmp")
            try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
            return [
                "HALCYON_HOME": home.path, "TMPDIR": tmp.path, "AWS_ACCESS_KEY_ID": TestEnvironment.s3AccessKey,
                "AWS_SECRET_ACCESS_KEY": TestEnvironment.s3SecretKey, "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL_S3": "http://\(h.rootAddress):\(forwarder.port(h.rootAddress, "s3"))",
            ]
        }
        func conninfo(_ h: NetworkHosts.Host) -> String {
            "host=\(h.rootAddress) port=\(forwarder.port(h.rootAddress, "pg")) \(socket.rest) dbname=\(db.name) connect_timeout=5"
        }
        func worker(_ h: NetworkHosts.Host) throws -> HalcyonProcess {
            let launch = net.launcher(on: h, TestEnvironment.binary)
            return try HalcyonProcess(
                launch.arguments + [
                    "work", "--drain", "--concurrency", "2", "--lease", "3s", "--store", store, "--allow-network", net.subnet,
                    "--worker-id", h.name, "--no-progress", "--log-level", "warning",
                ], conninfo: conninfo(h), environment: try environment(h), executable: launch.executable, newProcessGroup: false)
        }
        func first(_ sql: String, _ params: [String?] = []) async throws -> String? { try await c.execute(sql, params).rows.first?.first ?? nil }
        func number(_ sql: String) async throws -> Int { Int(try await first(sql) ?? "") ?? -1 }

        let started = Date()
        let workers = [try worker(a), try worker(b)]
        defer { for w in workers where w.isRunning { kill(-w.pid, SIGKILL) } }
        // Host a dies (SIGKILL to its worker's process group: the supervisor and its image
        // process) once it has recorded some successes, holding jobs.
        let killAfter = 150
        let reached = try await waitUntil(90) {
            guard workers[0].isRunning else { return true }
            return try await number("SELECT count(*) FROM public.outcomes WHERE worker = '\(a.name)'") >= killAfter
        }
        try #require(reached && workers[0].isRunning, "host a: \(workers[0].output.suffix(2000))")
        #expect(workers[0].children.count == 1, "the supervised worker has its image process: \(workers[0].children)")
        kill(-workers[0].pid, SIGKILL)
        let killedAt = Date()
        let killedDB = try #require(try await first("SELECT extract(epoch FROM clock_timestamp())").flatMap(Double.init))
        #expect(await workers[0].wait(timeout: 10) == 128 + SIGKILL)
        #expect(try await waitUntil(120) { net.pids(in: a).isEmpty }, "nothing of host a runs: \(net.pids(in: a))")
        let doneAtKill = try await number("SELECT count(*) FROM public.outcomes")
        // What a held when it died (an outcome it sent just before may still land: wait for it).
        try await Task.sleep(for: .milliseconds(300))
        let held = try await c.execute("SELECT id FROM halcyon.jobs WHERE state = 'running' AND locked_by = '\(a.name)' ORDER BY id").rows
            .compactMap { $0[0].flatMap { Int64($0) } }
        #expect(!held.isEmpty, "host a held jobs when it died")

        let survivor = await workers[1].wait(timeout: 100)
        let elapsed = Date().timeIntervalSince(started)
        #expect(survivor == 0, "host b: \(workers[1].output.suffix(3000))")

        // Exactly once: every job succeeded, each by one write of `succeeded`.
        let odd = try await c.execute("SELECT id, state::text, attempt, errors::text FROM halcyon.jobs WHERE state <> 'succeeded' LIMIT 5").rows
        #expect(try await number("SELECT count(*) FROM halcyon.jobs WHERE state = 'succeeded'") == Self.jobs, "\(odd)")
        let twice = try await c.execute("SELECT job_id, count(*) FROM public.outcomes GROUP BY job_id HAVING count(*) <> 1 LIMIT 5").rows
        #expect(twice.isEmpty, "jobs that succeeded more than once: \(twice)")
        #expect(try await number("SELECT count(DISTINCT job_id) FROM public.outcomes") == Self.jobs)
        let byHost = try await c.execute("SELECT worker, count(*) FROM public.outcomes GROUP BY worker ORDER BY worker").rows
        #expect(Set(byHost.compactMap { $0[0] }) == [a.name, b.name], "successes by worker: \(byHost)")
        // Attempts: the jobs a held when it died ran again on b after a lease_expired entry
        // naming a; every other job ran once, with no error at all.
        let heldList = "{" + held.map(String.init).joined(separator: ",") + "}"
        let rescued = try await c.execute(
            """
            SELECT j.id, j.attempt, o.worker, e->>'message' AS message, extract(epoch FROM (e->>'at')::timestamptz) AS at
            FROM halcyon.jobs j JOIN public.outcomes o ON o.job_id = j.id, jsonb_array_elements(j.errors) e
            WHERE j.id = ANY($1::bigint[])
            """, [heldList])
        #expect(rescued.count == held.count, "each held job has one error entry: \(rescued.rows.prefix(5))")
        for row in rescued.rows {
            #expect(row[1] == "2" && row[2] == b.name && row[3]?.contains(a.name) == true, "held by a: \(row)")
        }
        let others = try await c.execute(
            "SELECT id, attempt, errors::text FROM halcyon.jobs WHERE NOT (id = ANY($1::bigint[])) AND (attempt <> 1 OR errors <> '[]') LIMIT 5",
            [heldList]
        ).rows
        #expect(others.isEmpty, "jobs a did not hold ran once, without an error: \(others)")
        let requeued = rescued.rows.compactMap { $0[4].flatMap(Double.init) }.map { $0 - killedDB }
        let finishedHeld = try #require(
            try await first("SELECT extract(epoch FROM max(at)) FROM public.outcomes WHERE job_id = ANY($1::bigint[])", [heldList])
                .flatMap(Double.init))

        // The bucket: one key record per distinct result key, each key one object, one object per
        // distinct digest — and every object reads back whole from the surviving host.
        #expect(try await number("SELECT count(DISTINCT result_key) FROM halcyon.jobs") == Self.keys)
        let split = try await c.execute(
            "SELECT result_key FROM halcyon.jobs GROUP BY result_key HAVING count(DISTINCT result_digest) > 1 OR count(DISTINCT result_path) > 1 LIMIT 5"
        ).rows
        #expect(split.isEmpty, "keys with more than one object: \(split)")
        let digests = try await number("SELECT count(DISTINCT result_digest) FROM halcyon.jobs")
        // Objects both hosts stored (a miss on each: one wrote it, the other found it written).
        let shared = try await number(
            """
            SELECT count(*) FROM (SELECT j.result_digest FROM halcyon.jobs j JOIN public.outcomes o ON o.job_id = j.id
                                  WHERE NOT j.cache_hit GROUP BY j.result_digest HAVING count(DISTINCT o.worker) = 2) s
            """)
        #expect(shared > 0, "no object was stored by both hosts")
        #expect(digests == Self.colours * Self.sizes.count)
        guard case .objectStore(let configuration) = try StoreLocation(parsing: store, environment: TestEnvironment.s3Environment) else {
            Issue.record("\(store) is not an object store")
            return
        }
        let client = try S3Client(configuration: configuration)
        func listed(_ prefix: String) async throws -> Int {
            var count = 0
            var token: String?
            repeat {
                let page = try await client.list(prefix: prefix, continuationToken: token)
                count += page.entries.count
                token = page.nextContinuationToken
            } while token != nil
            return count
        }
        #expect(try await listed("keys/") == Self.keys)
        #expect(try await listed("objects/") == digests)
        let verify = try HalcyonProcess(
            net.launcher(on: b, TestEnvironment.binary).arguments + ["verify", "--store", store, "--json"], conninfo: nil,
            environment: try environment(b), executable: net.launcher(on: b, TestEnvironment.binary).executable, newProcessGroup: false)
        #expect(await verify.wait(timeout: 60) == 0, "\(verify.output)")
        if case .object(let report)? = JSONValue.parse(verify.output) {
            #expect(report["checked_objects"]?.numberValue == Double(digests), "\(verify.output)")
            #expect(report["corrupt"] == .array([]), "\(verify.output)")
        } else {
            Issue.record("verify --json: \(verify.output)")
        }
        // A few results, each fetched by its result_path from the host that did not record it.
        var fetched = 0
        for (producer, reader) in [(a, b), (b, a)] {
            let rows = try await c.execute(
                """
                SELECT j.id, j.result_path, j.result_digest FROM halcyon.jobs j JOIN public.outcomes o ON o.job_id = j.id
                WHERE o.worker = $1 AND NOT j.cache_hit ORDER BY j.id LIMIT 3
                """, [producer.name]
            ).rows
            #expect(rows.count == 3, "\(producer.name) stored results")
            for row in rows {
                let path = try #require(row[1]), digest = try #require(row[2])
                let out = try TestEnvironment.temporaryDirectory("fetched").appendingPathComponent("result")
                let endpoint = "http://\(reader.rootAddress):\(forwarder.port(reader.rootAddress, "s3"))"
                let got = try net.run(
                    on: reader, "/usr/bin/curl",
                    [
                        "-sS", "-f", "--max-time", "10", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        "\(TestEnvironment.s3AccessKey):\(TestEnvironment.s3SecretKey)", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        "-o", out.path, "\(endpoint)/\(configuration.bucket)/\(configuration.prefix)\(path)",
                    ])
                #expect(got.status == 0, "\(reader.name) fetching \(path): \(got.output)")
                let bytes = try Data(contentsOf: out)
                #expect(Digest.sha256Hex(bytes) == digest, "\(path) read from \(reader.name)")
                fetched += 1
            }
        }
        #expect(fetched == 6)

        let beforeKill = killedAt.timeIntervalSince(started)
        print(
            String(
                format:
                    "crosshost: %d jobs (%d keys, %d objects, %d stored by both) on 2 hosts (netns, concurrency 2 each, S3 store, lease 3 s): drained in %.2f s = %.0f jobs/s; "
                    + "both hosts: %d jobs in %.2f s = %.0f jobs/s; host a killed holding %d jobs, requeued %.1f–%.1f s after the kill, all done by %.1f s",
                Self.jobs, Self.keys, digests, shared, elapsed, Double(Self.jobs) / elapsed, doneAtKill, beforeKill, Double(doneAtKill) / beforeKill,
                held.count, requeued.min() ?? -1, requeued.max() ?? -1, finishedHeld - killedDB))
    }
}
