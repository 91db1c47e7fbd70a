import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

@testable import HalcyonS3

@Suite struct S3ConfigurationTests {
    /// A client of an endpoint nothing listens on (the discard port): every try is a connection error.
    static func unreachableClient(attempts: Int, retryBaseDelay: Duration, maxRetryDelay: Duration = .seconds(5)) throws -> S3Client {
        var config = S3Configuration(bucket: "bucket")
        config.endpoint = URL(string: "http://127.0.0.1:9")
        config.credentials = S3Credentials(accessKeyID: "a", secretAccessKey: "b")
        config.maxAttempts = attempts
        config.retryBaseDelay = retryBaseDelay
        config.maxRetryDelay = maxRetryDelay
        return try S3Client(configuration: config)
    }

    @Test func parsesBucketAndPrefix() throws {
        #expect(try S3Configuration.parse("s3://my-bucket") == ("my-bucket", ""))
        #expect(try S3Configuration.parse("s3://my-bucket/") == ("my-bucket", ""))
        #expect(try S3Configuration.parse("s3://my-bucket/images") == ("my-bucket", "images/"))
        #expect(try S3Configuration.parse("s3://my.bucket.example/a/b/") == ("my.bucket.example", "a/b/"))
        #expect(try S3Configuration.parse("s3://my-bucket/a.b/..c/\u{600}x") == ("my-bucket", "a.b/..c/\u{600}x/"))
    }

    /// A store's prefix, split at `/` bytes: no empty, `.` or `..` segment, which a server may
    /// normalise away (it would then store entries under keys the sweep's listing never shows).
    @Test(arguments: ["s3://my-bucket/a//b", "s3://my-bucket/a/./b", "s3://my-bucket/../b", "s3://my-bucket/a/..", "s3://my-bucket/\u{600}/../b"])
    func refusesPrefixesWithEmptyOrDotSegments(url: String) {
        #expect { _ = try S3Configuration.parse(url) } throws: { ($0 as? HalcyonError)?.code == .invalidOptions }
    }

    @Test(arguments: [
        "s3://ab", "s3://" + String(repeating: "a", count: 64), "s3://My-Bucket", "s3://-bucket", "s3://bucket-", "s3://a..b", "s3://192.168.1.1",
        "s3://under_score", "https://bucket", "bucket", "s3:///prefix",
    ])
    func refusesBadBucketNames(url: String) {
        #expect { _ = try S3Configuration.parse(url) } throws: { ($0 as? HalcyonError)?.code == .invalidOptions }
    }

    @Test func acceptsBucketNamesAtTheBounds() throws {
        #expect(try S3Configuration.parse("s3://abc").bucket == "abc")
        #expect(try S3Configuration.parse("s3://" + String(repeating: "a", count: 63)).bucket.count == 63)
    }

    @Test func readsTheAWSVariables() throws {
        let env = [
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret-value-123", "AWS_SESSION_TOKEN": "token-456",
            "AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "us-west-2",
            "AWS_ENDPOINT_URL_S3": "https://s3.example.net", "AWS_ENDPOINT_URL": "https://other.example.net",
        ]
        let c = try S3Configuration(url: "s3://bucket/p", environment: env)
        #expect(c.credentials == S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret-value-123", sessionToken: "token-456"))
        #expect(c.region == "eu-west-3")
        #expect(c.resolvedEndpoint.absoluteString == "https://s3.example.net")
        #expect(!c.usesPathStyle)
        #expect(c.prefix == "p/")
    }

    @Test func fallsBackInTheAWSOrder() throws {
        var c = try S3Configuration(
            url: "s3://bucket", environment: ["AWS_DEFAULT_REGION": "ap-south-1", "AWS_ENDPOINT_URL": "http://10.1.2.3:9000"])
        #expect(c.region == "ap-south-1")
        #expect(c.resolvedEndpoint.absoluteString == "http://10.1.2.3:9000")
        #expect(c.credentials == nil)
        c = try S3Configuration(url: "s3://bucket", environment: [:])
        #expect(c.region == "us-east-1")
        #expect(c.resolvedEndpoint.absoluteString == "https://s3.us-east-1.amazonaws.com")
        #expect(!c.usesPathStyle)
        // One key of the pair is not credentials.
        c = try S3Configuration(url: "s3://bucket", environment: ["AWS_ACCESS_KEY_ID": "x"])
        #expect(c.credentials == nil)
    }

    @Test func addressingFollowsTheEndpoint() throws {
        func style(_ endpoint: String, _ env: [String: String] = [:], bucket: String = "bucket") throws -> Bool {
            try S3Configuration(url: "s3://\(bucket)", environment: env.merging(["AWS_ENDPOINT_URL": endpoint]) { a, _ in a }).usesPathStyle
        }
        #expect(try style("http://127.0.0.1:8333"))
        #expect(try style("http://[::1]:8333"))
        #expect(try style("http://localhost:9000"))
        #expect(try !style("https://s3.eu-west-1.amazonaws.com"))
        #expect(try !style("https://storage.example.com"))
        #expect(try style("https://storage.example.com", bucket: "dotted.bucket"))
        #expect(try style("https://storage.example.com", ["HALCYON_S3_PATH_STYLE": "1"]))
        #expect(try !style("http://127.0.0.1:8333", ["HALCYON_S3_PATH_STYLE": "0"]))
        #expect { try style("https://storage.example.com", ["HALCYON_S3_PATH_STYLE": "maybe"]) } throws: {
            ($0 as? HalcyonError)?.code == .invalidOptions
        }
    }

    @Test(arguments: ["ftp://host", "not a url", "https://host/path", "https://user:pw@host", "https://host?x=1"])
    func refusesBadEndpoints(endpoint: String) {
        #expect { _ = try S3Configuration(url: "s3://bucket", environment: ["AWS_ENDPOINT_URL_S3": endpoint]) } throws: {
            guard let e = $0 as? HalcyonError else { return false }
            return e.code == .invalidOptions && !e.description.contains("pw@")
        }
    }

    @Test func validatesEachSetting() {
        func invalid(_ change: (inout S3Configuration) -> Void) -> Bool {
            var c = S3Configuration(bucket: "bucket")
            change(&c)
            do {
                try c.validate()
                return false
            } catch { return error.code == .invalidOptions }
        }
        #expect(!invalid { _ in })
        #expect(invalid { $0.connectTimeout = .milliseconds(10) })
        #expect(invalid { $0.requestTimeout = .zero })
        #expect(invalid { $0.maxAttempts = 0 })
        #expect(invalid { $0.maxAttempts = 21 })
        #expect(invalid { $0.maxRetryDelay = .milliseconds(1) })
        #expect(invalid { $0.maxXMLBytes = 1000 })
        #expect(invalid { $0.region = "EU West" })
        #expect(invalid { $0.bucket = "x" })
    }

    @Test func documentedDefaults() {
        let c = S3Configuration(bucket: "bucket")
        #expect(c.connectTimeout == .seconds(5))
        #expect(c.requestTimeout == .seconds(120))
        #expect(c.maxAttempts == 4)
        #expect(c.retryBaseDelay == .milliseconds(100))
        #expect(c.maxRetryDelay == .seconds(5))
        #expect(c.maxXMLBytes == 8 << 20)
        #expect(c.pathStyle == nil)
        #expect(c.region == "us-east-1")
    }

    /// No credential in `description`, `debugDescription`, string interpolation or `dump`.
    @Test func credentialsNeverPrint() throws {
        let env = ["AWS_ACCESS_KEY_ID": "AKIALEAKCHECK0001", "AWS_SECRET_ACCESS_KEY": "sEcReT/leak+check", "AWS_SESSION_TOKEN": "TOKENleakcheck"]
        let c = try S3Configuration(url: "s3://bucket/p", environment: env)
        var dumped = ""
        dump(c.credentials, to: &dumped)
        for text in ["\(c)", String(describing: c.credentials!), String(reflecting: c.credentials!), "\(c.credentials!)", c.description] {
            for secret in ["AKIALEAKCHECK0001", "sEcReT/leak+check", "TOKENleakcheck"] { #expect(!text.contains(secret), "\(text)") }
        }
        #expect(c.description.contains("s3://bucket/p/"))
        #expect(c.description.contains("credentials and session token set"))
    }

    @Test func backoffIsBoundedAndJittered() throws {
        var config = S3Configuration(bucket: "bucket")
        config.retryBaseDelay = .milliseconds(100)
        config.maxRetryDelay = .seconds(1)
        let client = try S3Client(configuration: config)
        for attempt in 1...12 {
            let ceiling = min(1.0, 0.1 * pow(2, Double(attempt - 1)))
            for _ in 0..<50 { #expect((0...ceiling).contains(client.backoff(attempt: attempt, retryAfter: nil).seconds)) }
        }
        #expect(client.backoff(attempt: 1, retryAfter: 0.5) >= .milliseconds(500))
        #expect(client.backoff(attempt: 1, retryAfter: 60) == .seconds(1))
    }

    /// The waits between tries hold no thread and end with the calling task: a cancelled caller
    /// gets `job.cancelled` at once, not after the back-off (a minute here), and sends no more tries.
    @Test func aCancelledTaskEndsTheWaitBetweenTries() async throws {
        let s3 = try Self.unreachableClient(attempts: 20, retryBaseDelay: .seconds(60), maxRetryDelay: .seconds(60))
        let started = ContinuousClock.now
        let head = Task { () -> HalcyonError? in
            do throws(HalcyonError) {
                _ = try await s3.head("k")
                return nil
            } catch {
                return error
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        head.cancel()
        let error = await head.value
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(s3.requestsSent < 20)
    }

    /// A raised flag ends a wait too; without one, the wait is the delay.
    @Test func aRaisedFlagEndsTheWaitBetweenTries() async {
        let flag = CancellationFlag()
        Task {
            try? await Task.sleep(for: .milliseconds(100))
            flag.cancel()
        }
        let started = ContinuousClock.now
        #expect(await S3Client.pause(.seconds(60), cancel: flag) == false)
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(await S3Client.pause(.milliseconds(10), cancel: nil))
        #expect(await S3Client.pause(.milliseconds(10), cancel: CancellationFlag()))
    }

    /// The retries' waits before there was one back-off, pinned: random in 0…ceiling, the ceiling
    /// `retryBaseDelay` (100 ms) doubling to `maxRetryDelay` (5 s); a Retry-After lengthens a wait
    /// up to that cap.
    @Test func backoffCeilingsAndRetryAfter() throws {
        let client = try S3Client(configuration: S3Configuration(bucket: "bucket"))
        let ceilings = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5, 5, 5]
        for (attempt, ceiling) in zip(1..., ceilings) {
            let waits = (0..<300).map { _ in client.backoff(attempt: attempt, retryAfter: nil).seconds }
            #expect(waits.allSatisfy { (0...ceiling + 1e-9).contains($0) }, "attempt \(attempt)")
            #expect(waits.max()! > ceiling * 0.9, "attempt \(attempt): the draws reach near the ceiling")
            #expect(waits.min()! < ceiling * 0.1, "attempt \(attempt): and near zero")
        }
        #expect(abs(client.backoff(attempt: 1, retryAfter: 0.5).seconds - 0.5) < 1e-9, "longer than any draw")
        #expect(abs(client.backoff(attempt: 1, retryAfter: 3).seconds - 3) < 1e-9)
        #expect(abs(client.backoff(attempt: 1, retryAfter: 60).seconds - 5) < 1e-9, "capped")
        #expect(abs(client.backoff(attempt: 1, retryAfter: .infinity).seconds - 5) < 1e-9, "capped")
        for after in [0, -1, Double.nan] {
            #expect((0...0.1 + 1e-9).contains(client.backoff(attempt: 1, retryAfter: after).seconds), "\(after) is no Retry-After")
        }
        var zero = S3Configuration(bucket: "bucket")
        zero.retryBaseDelay = .zero
        #expect(try S3Client(configuration: zero).backoff(attempt: 3, retryAfter: nil) == .zero)
        // The draw given: r × the ceiling.
        let ceilingWaits = ceilings.indices.map { client.backoff(attempt: $0 + 1, retryAfter: nil, random: 0.5).seconds }
        #expect(zip(ceilingWaits, ceilings).allSatisfy { abs($0 - $1 / 2) < 1e-9 }, "\(ceilingWaits)")
        #expect(client.backoff(attempt: 4, retryAfter: nil, random: 1) == client.configuration.retryBackoff.ceiling(afterAttempt: 4))
    }
}

@Suite struct MiniXMLTests {
    @Test func readsAListPage() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>true</IsTruncated>
            <Contents><Key>a%20b%2Bc</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified><ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size></Contents>
            <Contents><Key> spaced </Key><Size>0</Size></Contents>
            <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken><EncodingType>url</EncodingType></ListBucketResult>
            """
        let root = try MiniXML.parse(Data(xml.utf8))
        #expect(root.name == "ListBucketResult")
        let contents = root.all("Contents")
        #expect(contents.count == 2)
        #expect(contents[0].value("ETag") == "\"fba9dede5f27731c9771645a39863328\"")
        #expect(S3Client.formDecode(contents[0].value("Key")!) == "a b+c")
        #expect(contents[1].value("Key") == " spaced ")
        #expect(root.value("NextContinuationToken") == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        #expect(S3Client.parseISO8601("2009-10-12T17:50:30.000Z") == Date(timeIntervalSince1970: 1_255_369_830))
    }

    @Test func readsAnError() {
        let xml =
            "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match &amp; &#x41;&#66;</Message><RequestId>42</RequestId></Error>"
        let e = S3Client.parseError(Data(xml.utf8))
        #expect(e.code == "SignatureDoesNotMatch")
        #expect(e.message == "The request signature we calculated does not match & AB")
        #expect(e.requestID == "42")
        #expect(S3Client.parseError(Data("not xml".utf8)).code == nil)
    }

    @Test(arguments: [
        "<a><b></a>", "<a>", "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>", "<a>&bogus;</a>", "<a></a><b></b>", "", "<a><![CDATA[x</a>",
        String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40),
    ])
    func refusesMalformedOrHostileXML(xml: String) {
        #expect(throws: MiniXML.Malformed.self) { _ = try MiniXML.parse(Data(xml.utf8)) }
    }
}
