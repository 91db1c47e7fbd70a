import Foundation
import FoundationNetworking
import HalcyonQueue
import HalcyonRuntime
import HalcyonTestSupport
import Testing

/// No secret reaches a log line, at any level, in either format, nor a command's error: the
/// database password (in a URI and in a keyword/value string), the webhook secrets, the AWS
/// secret key and session token, the dashboard's tokens — through a worker storing in a bucket
/// and delivering a webhook, `halcyon deliver`, the dashboard serving signed-in requests and
/// results from the bucket, and connections that fail (a host that does not resolve, a port
/// nobody listens on, URIs libpq cannot parse and quotes back).
@Suite(.enabled(if: TestEnvironment.available && TestEnvironment.s3Available, "needs scripts/test (PostgreSQL, origin, SeaweedFS)"), .processes)
struct SecretLoggingTests {
    let helper = WorkerTests()

    /// Secrets of one run, each unique to it.
    struct Secrets {
        let tag: String
        var databasePassword: String { "db-pass-\(tag)-Qx" }
        var webhookSecret: String { "whsec_" + Data("webhook-key-\(tag)".utf8).base64EncodedString() }
        var plainWebhookSecret: String { "plain-hook-\(tag)" }
        var sessionToken: String { "session-token-\(tag)" }
        var operatorToken: String { "dash-operator-\(tag)" }
        var viewerToken: String { "dash-viewer-\(tag)" }
        var badURLPassword: String { "bad-url-pass-\(tag)" }

        /// Every value that must not appear (a `whsec_` secret also without its prefix).
        var all: [String] {
            [
                databasePassword, webhookSecret, String(webhookSecret.dropFirst(6)), plainWebhookSecret, TestEnvironment.s3SecretKey, sessionToken,
                operatorToken, viewerToken, badURLPassword,
            ]
        }
    }

    /// `db`'s keyword/value connection string (a socket directory) as a URI with a password.
    static func uri(_ db: TestDatabase, password: String) -> String {
        var parts: [String: String] = [:]
        for pair in db.conninfo.split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { parts[kv[0]] = kv[1] }
        }
        let host = parts["host"]!.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return "postgresql://\(parts["user"] ?? "postgres"):\(password)@/\(db.name)?host=\(host)&port=\(parts["port"] ?? "5432")"
    }

    @Test(arguments: ["text", "json"])
    func noSecretReachesTheLogs(format: String) async throws {
        _ = try WorkerTests.published()
        let db = try await TestDatabase.create()
        let s = Secrets(tag: db.name)
        let logging = ["--log-level", "trace", "--log-format", format]
        // The S3 server knows no session token (it refuses one): the store is reached with the key
        // pair alone, and the token is given where a refusal is the expected outcome.
        let aws = TestEnvironment.s3Environment
        let awsWithToken = aws.merging(["AWS_SESSION_TOKEN": s.sessionToken]) { $1 }
        let store = TestEnvironment.s3StoreURL()
        var outputs: [(String, String)] = []

        // A worker storing in the bucket, signing a webhook; the password in a URI.
        let o = TestEnvironment.origin
        let id = try #require(
            try await db.query(
                "SELECT halcyon.enqueue($1, processors => 'resize(8x8) |> format(png)', options => jsonb_build_object('callback_url', $2::text)) AS id",
                ["\(o)/files/tiny.png?t=\(db.name)", "\(o)/webhook/\(db.name)/0"]
            ).value(0, "id"))
        _ = try await helper.enqueue(db, [helper.job("s3://\(TestEnvironment.s3Bucket)/no-such-\(db.name).png", maxAttempts: 1)])
        let worker = try HalcyonProcess(
            [
                "work", "--drain", "--no-progress", "--store", store, "--allow-network", "127.0.0.1/32", "--webhook-secret", s.webhookSecret,
                "--webhook-secret", s.plainWebhookSecret, "--webhook-attempts", "1",
            ] + logging,
            conninfo: nil, environment: aws.merging(["DATABASE_URL": Self.uri(db, password: s.databasePassword)]) { $1 })
        #expect(await worker.wait(timeout: 180) == 0, "\(worker.output.suffix(3000))")
        outputs.append(("work", worker.output))
        let row = try await db.query("SELECT state::text, result_digest, callback_status FROM halcyon.jobs WHERE id = $1::bigint", [id])
        #expect(
            row.value(0, "state") == "succeeded" && row.value(0, "callback_status") == "failed", "\(row.dictionaries): \(worker.output.suffix(3000))")
        let digest = try #require(row.value(0, "result_digest"))

        // A worker with a session token reading an s3:// source (refused: the token is unknown),
        // the password in a keyword/value string; `verify` of the bucket with the token.
        _ = try await helper.enqueue(db, [helper.job("s3://\(TestEnvironment.s3Bucket)/token-\(db.name).png", maxAttempts: 1)])
        let withToken = try HalcyonProcess(
            ["work", "--drain", "--no-progress", "--store", try TestEnvironment.temporaryDirectory("store").path] + logging,
            conninfo: db.conninfo + " password=\(s.databasePassword)", environment: awsWithToken)
        #expect(await withToken.wait(timeout: 180) == 0, "\(withToken.output.suffix(3000))")
        #expect(withToken.output.contains("s3://\(TestEnvironment.s3Bucket)/token-\(db.name).png"), "\(withToken.output.suffix(3000))")
        outputs.append(("work (session token)", withToken.output))
        let verify = try HalcyonProcess(["verify", "--store", store], conninfo: nil, environment: awsWithToken)
        #expect(await verify.wait(timeout: 120) != 0, "the S3 server refuses the unknown token: \(verify.output)")
        outputs.append(("verify (session token)", verify.output))

        // `halcyon deliver`, its secrets in the environment, the password in a keyword/value string.
        try await db.query(
            "UPDATE halcyon.jobs SET callback_status = 'pending', callback_attempts = 0, callback_at = now() WHERE id = $1::bigint", [id])
        let deliver = try HalcyonProcess(
            ["deliver", "--drain", "--grace", "1s", "--allow-network", "127.0.0.1/32", "--webhook-attempts", "1"] + logging,
            conninfo: db.conninfo + " password=\(s.databasePassword)",
            environment: ["HALCYON_WEBHOOK_SECRET": "\(s.webhookSecret) \(s.plainWebhookSecret)"])
        #expect(await deliver.wait(timeout: 120) == 0, "\(deliver.output.suffix(3000))")
        outputs.append(("deliver", deliver.output))

        // The dashboard: tokens, sign-in, a result from the bucket.
        let dashboard = try HalcyonProcess(
            ["dashboard", "--port", "0", "--store", store, "--auth-token", s.operatorToken, "--viewer-token", s.viewerToken] + logging,
            conninfo: Self.uri(db, password: s.databasePassword), environment: aws)
        defer { dashboard.signal(SIGKILL) }
        #expect(try await waitUntil(120) { dashboard.output.contains("dashboard: http://127.0.0.1:") }, "\(dashboard.output)")
        let base = try #require(
            dashboard.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).first { $0.hasPrefix("http://127.0.0.1:") }.map(String.init))
        let session = URLSession(configuration: .ephemeral)
        func request(_ path: String, token: String?, method: String = "GET", form: String? = nil) async throws -> Int {
            var r = URLRequest(url: URL(string: base.hasSuffix("/") ? base + path.dropFirst() : base + path)!)
            r.httpMethod = method
            if let token { r.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            if let form {
                r.httpBody = Data(form.utf8)
                r.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            }
            let (_, response) = try await session.data(for: r)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
        #expect(try await request("/api/overview", token: s.operatorToken) == 200)
        #expect(try await request("/results/\(digest)", token: s.viewerToken) == 200)
        #expect(try await request("/api/overview", token: String(s.operatorToken.reversed())) == 401)
        #expect(try await request("/jobs/\(id)/retry", token: s.viewerToken, method: "POST") == 403)
        _ = try await request("/login", token: nil, method: "POST", form: "token=\(s.operatorToken)&next=%2F")
        _ = try await request("/login", token: nil, method: "POST", form: "token=\(s.viewerToken)x&next=%2F")
        dashboard.signal(SIGTERM)
        #expect(await dashboard.wait(timeout: 30) == 0, "\(dashboard.output.suffix(2000))")
        outputs.append(("dashboard", dashboard.output))

        // Connections that fail: the password in the URL each time.
        let pw = s.badURLPassword
        for url in [
            "postgresql://halcyon:\(pw)@nohost.invalid:5432/halcyon?connect_timeout=3",
            "postgresql://halcyon:\(pw)@127.0.0.1:1/halcyon?connect_timeout=3",
            "postgresql://halcyon:\(pw)@[::1",  // libpq quotes the whole URI back
            "postgresql://halcyon:\(pw)%zz@127.0.0.1:1/halcyon",  // … or the password's token
            "host=127.0.0.1 port=1 password='\(pw)' dbname=halcyon connect_timeout=3",
        ] {
            let status = try HalcyonProcess(["status"], conninfo: url)
            #expect(await status.wait(timeout: 60) != 0)
            #expect(status.output.contains("Error: "), "\(status.output)")
            outputs.append(("status \(Redaction.conninfo(url))", status.output))
        }
        // A worker waiting for a database it cannot reach logs each failed attempt.
        let waiting = try HalcyonProcess(
            ["work", "--store", try TestEnvironment.temporaryDirectory("store").path] + logging,
            conninfo: "postgresql://halcyon:\(pw)@[::1")
        #expect(
            try await waitUntil(120) { waiting.output.components(separatedBy: "retrying").count > 2 || !waiting.isRunning },
            "\(waiting.output.suffix(2000))")
        waiting.signal(SIGKILL)
        _ = await waiting.wait(timeout: 30)
        #expect(waiting.output.contains("retrying"), "\(waiting.output.suffix(2000))")
        outputs.append(("work (no database)", waiting.output))

        for (name, output) in outputs {
            for secret in s.all {
                #expect(!output.contains(secret), "\(name) printed a secret (\(secret.prefix(12))…): \(output.suffix(4000))")
            }
            #expect(!output.contains("WorkerConfiguration("), "\(name)")
        }
        // The connection strings are shown with their passwords masked.
        let failures = outputs.filter { $0.0.hasPrefix("status") || $0.0.hasPrefix("work (") }.map(\.1).joined()
        #expect(failures.contains("postgresql://halcyon:***@[::1"), "\(failures)")
    }
}
