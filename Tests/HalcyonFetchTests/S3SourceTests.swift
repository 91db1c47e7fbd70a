import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonRuntime
import HalcyonS3
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Synchronization
import Testing

/// `s3://BUCKET/KEY` as it is parsed (no server needed).
@Suite struct S3SourceParseTests {
    @Test func bucketAndLiteralKey() throws {
        #expect(try Source.parse("s3://images-1/a/b.jpg") == .object(bucket: "images-1", key: "a/b.jpg"))
        // The key is literal: no percent-decoding, `?` and `#` are part of it.
        #expect(try Source.parse("s3://my.bucket/a%20b?x=1#y") == .object(bucket: "my.bucket", key: "a%20b?x=1#y"))
        #expect(try Source.parse("S3://abc/k") == .object(bucket: "abc", key: "k"))
        #expect(try Source.parse("s3://abc/a.b/..c/.../d.") == .object(bucket: "abc", key: "a.b/..c/.../d."))
        // A character that joins the next one into a grapheme cluster is part of its own segment.
        #expect(try Source.parse("s3://abc/\u{600}x/k") == .object(bucket: "abc", key: "\u{600}x/k"))
        #expect(
            try Source.parse("s3://abc/" + String(repeating: "k", count: 1024)) == .object(bucket: "abc", key: String(repeating: "k", count: 1024)))
        #expect(try Source.parse("s3://abc/a/b.jpg").displayName == "s3://abc/a/b.jpg")
    }

    @Test func refusals() {
        for bad in [
            "s3://abc", "s3://abc/", "s3:///key", "s3://ab/key", "s3://Upper/key", "s3://-abc/key", "s3://a..b/key", "s3://192.168.1.1/key",
            "s3://abc/../other/key", "s3://abc/a/./b", "s3://abc/..", "s3://abc/a\u{1}b", "s3://abc/" + String(repeating: "k", count: 1025),
            "s3://user@host:9000/key",
            // Empty segments: a server may read `u/a.jpg` for `//u/a.jpg` (SeaweedFS does).
            "s3://abc//u/a.jpg", "s3://abc/a//b", "s3://abc/a/", "s3://abc///",
            // Segments are split on the byte `/`, not on Characters: U+0600 (a prepended
            // concatenation mark) makes `\u{600}/` one Character, which hid the `..` after it.
            "s3://abc/\u{600}/../k", "s3://abc/a/\u{600}/./k", "s3://abc/\u{600}/..", "s3://abc/x\u{600}//k",
            // C1 control characters, as C0.
            "s3://abc/a\u{85}b",
        ] {
            #expect(throws: HalcyonError.self, "\(bad.prefix(40))") { _ = try Source.parse(bad) }
            do { _ = try Source.parse(bad) } catch { #expect(error.code == .invalidSource, "\(bad.prefix(40)): \(error)") }
        }
    }

    @Test func s3SourcesAreNotLocal() throws {
        #expect(try FetchRequest(sources: ["s3://abc/k"]).isLocal == false)
    }

    @Test func environmentIsReadOnceAndChecked() throws {
        var c = FetchConfiguration()
        try c.readS3Environment([
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret-never-printed", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000",
            "AWS_REGION": "eu-west-1", "HALCYON_S3_SOURCE_BUCKETS": "one-bucket, two.bucket",
        ])
        #expect(c.s3?.region == "eu-west-1")
        #expect(c.s3?.credentials?.accessKeyID == "AKIDEXAMPLE")
        #expect(c.s3SourceBuckets == ["one-bucket", "two.bucket"])
        #expect(!"\(String(describing: c.s3))".contains("secret-never-printed"))
        var bad = FetchConfiguration()
        #expect(throws: HalcyonError.self) { try bad.readS3Environment(["HALCYON_S3_SOURCE_BUCKETS": "Not_A_Bucket"]) }
        #expect(throws: HalcyonError.self) { try bad.readS3Environment(["AWS_ENDPOINT_URL_S3": "ftp://x"]) }
    }
}

/// `s3://` sources against the real S3 server `scripts/test` starts (SeaweedFS).
@Suite(.enabled(if: TestEnvironment.s3Available && TestEnvironment.available, "needs scripts/test (SeaweedFS, origin)"))
struct S3SourceTests {
    static let png: Data = try! SampleImages.solid(width: 8, height: 8, red: 1, green: 200, blue: 3)
    static let bucket = TestEnvironment.s3Bucket

    static var environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": TestEnvironment.s3AccessKey, "AWS_SECRET_ACCESS_KEY": TestEnvironment.s3SecretKey,
            "AWS_ENDPOINT_URL_S3": TestEnvironment.s3Endpoint, "AWS_REGION": "us-east-1",
        ]
    }

    /// A client to put the test's objects with, under a prefix of its own.
    static func writer() throws -> (S3Client, String) {
        let prefix = "src-\(UUID().uuidString.prefix(8))"
        let config = try S3Configuration(url: "s3://\(bucket)/\(prefix)", environment: environment)
        return (try S3Client(configuration: config), prefix)
    }

    static func makeFetcher(
        environment: [String: String] = S3SourceTests.environment, retries: Int = 2, tweak: (inout FetchConfiguration) -> Void = { _ in }
    ) throws -> Fetcher {
        var c = FetchConfiguration()
        c.totalTimeout = .seconds(10)
        c.connectTimeout = .seconds(2)
        c.retry = DelayRetryStrategy(maxRetries: retries, interval: .fixed(0.05))
        try c.readS3Environment(environment)
        tweak(&c)
        return Fetcher(configuration: c)
    }

    static func error(_ body: () async throws -> Void) async -> HalcyonError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? HalcyonError
        }
    }

    @Test func fetchesAnObjectWhoseKeyHasQueryAndFragmentCharacters() async throws {
        let (s3, prefix) = try Self.writer()
        let name = "a b?c=1#frag%41+~.png"
        _ = try await s3.put(name, data: Self.png, contentType: "image/png")
        let source = "s3://\(Self.bucket)/\(prefix)/\(name)"
        let image = try await Self.makeFetcher().fetch(source, cancel: CancellationFlag())
        #expect(image.data == Self.png)
        #expect(image.format == .png)
        #expect(image.source == source)
    }

    /// A key is read as named or not at all: `s3://BUCKET//KEY` (a key beginning with `/`) was
    /// read as `KEY` by SeaweedFS, and a `..` segment hidden behind a joining character reached
    /// the server. Both are refused (`job.invalid_source`) before any request.
    @Test func aKeyWithAnEmptyOrHiddenDotSegmentIsRefusedNotNormalised() async throws {
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("u/a.png", data: Self.png, contentType: "image/png")
        #expect(try await Self.makeFetcher().fetch("s3://\(Self.bucket)/\(prefix)/u/a.png", cancel: CancellationFlag()).data == Self.png)
        for source in [
            "s3://\(Self.bucket)//\(prefix)/u/a.png", "s3://\(Self.bucket)/\(prefix)//u/a.png",
            "s3://\(Self.bucket)/\(prefix)/u/\u{600}/../u/a.png",
        ] {
            let e = await Self.error { _ = try await Self.makeFetcher().fetch(source, cancel: CancellationFlag()) }
            #expect(e?.code == .invalidSource, "\(source): \(e.map { "\($0)" } ?? "read")")
        }
    }

    /// The row's check (`halcyon.is_valid_source`, on `source` and `fallback_sources`) and the
    /// worker's parser agree: no `s3://` source the worker reads is refused at INSERT, and what
    /// does not even look like `s3://BUCKET/…` is refused there; the rest (a bad bucket name, an
    /// empty or dot segment, an over-long key) is refused when the job is claimed. The check is
    /// coarse on purpose: PostgreSQL re-checks it on every UPDATE of a row, so a stricter one
    /// would make every row already holding such a source fail its next claim or outcome.
    @Test func theRowsCheckAcceptsEveryS3SourceTheWorkerReads() async throws {
        let db = try await TestDatabase.create()
        let readable = [
            "s3://abc/k", "S3://abc/k", "s3://my.bucket/a%20b?x=1#y", "s3://abc/a.b/..c/.../d.", "s3://abc/\u{600}x/k",
            "s3://abc/" + String(repeating: "k", count: 1024),
        ]
        let looksWrong = ["s3://abc", "s3://abc/", "s3:///key", "s3://ab/key", "s3://a_b/key", "s3://user@host:9000/key"]
        let refusedWhenClaimed = [
            "s3://abc//u/a.jpg", "s3://abc/a//b", "s3://abc/a/", "s3://abc/../k", "s3://abc/\u{600}/../k", "s3://Upper/key",
            "s3://a..b/key", "s3://192.168.1.1/key", "s3://abc/" + String(repeating: "k", count: 1025),
        ]
        func inserted(_ source: String) async -> Bool {
            do {
                try await db.query("INSERT INTO halcyon.jobs (source, fallback_sources) VALUES ($1, ARRAY[$1])", [source])
                return true
            } catch {
                return false
            }
        }
        for source in readable {
            #expect((try? Source.parse(source)) != nil, "\(source.prefix(40))")
            #expect(await inserted(source), "\(source.prefix(40)) refused by the row's check")
        }
        for source in looksWrong {
            #expect((try? Source.parse(source)) == nil, "\(source.prefix(40))")
            let accepted = await inserted(source)
            #expect(!accepted, "\(source.prefix(40)) accepted by the row's check")
        }
        for source in refusedWhenClaimed {
            #expect((try? Source.parse(source)) == nil, "\(source.prefix(40))")
            #expect(await inserted(source), "\(source.prefix(40))")
        }
    }

    @Test func aMissingKeyIsAPermanentHTTPStatusAndNotRetried() async throws {
        let (_, prefix) = try Self.writer()
        let source = "s3://\(Self.bucket)/\(prefix)/nothing-here.png"
        let e = await Self.error { _ = try await Self.makeFetcher(retries: 3).fetch(sources: [source], cancel: CancellationFlag()) }
        let error = try #require(e)
        #expect(error.code == .httpStatus)
        #expect(error.permanent)
        #expect(error.message.contains("404") && error.message.contains("NoSuchKey"), "\(error.message)")
        #expect(!error.message.contains("attempts"), "a 404 is not retried: \(error.message)")
    }

    @Test func wrongCredentialsArePermanentAndNeverPrinted() async throws {
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("x.png", data: Self.png)
        var env = Self.environment
        let wrong = "wrong-secret-\(UUID().uuidString)"
        env["AWS_SECRET_ACCESS_KEY"] = wrong
        let source = "s3://\(Self.bucket)/\(prefix)/x.png"
        let e = await Self.error { _ = try await Self.makeFetcher(environment: env, retries: 3).fetch(sources: [source], cancel: CancellationFlag()) }
        let error = try #require(e)
        #expect(error.code == .httpStatus)
        #expect(error.permanent)
        #expect(error.message.contains("403"), "\(error.message)")
        let everything = "\(error) \(error.message) \(error.detail ?? "") \(error.source ?? "") \(error.sources)"
        for secret in [wrong, TestEnvironment.s3SecretKey, TestEnvironment.s3AccessKey] {
            #expect(!everything.contains(secret), "a credential in \(everything)")
        }
    }

    @Test func noCredentialsFailPermanentlyNamingTheVariables() async throws {
        for env in [[:], ["AWS_ENDPOINT_URL_S3": TestEnvironment.s3Endpoint, "AWS_ACCESS_KEY_ID": TestEnvironment.s3AccessKey]] {
            let e = await Self.error {
                _ = try await Self.makeFetcher(environment: env).fetch(sources: ["s3://\(Self.bucket)/k.png"], cancel: CancellationFlag())
            }
            let error = try #require(e)
            #expect(error.code == .invalidSource && error.permanent)
            #expect(error.message.contains("AWS_ACCESS_KEY_ID") && error.message.contains("AWS_SECRET_ACCESS_KEY"), "\(error.message)")
            #expect(!error.message.contains(TestEnvironment.s3AccessKey))
        }
        // Without `readS3Environment` at all (a program that builds its own configuration).
        let plain = Fetcher(configuration: FetchConfiguration())
        let e = await Self.error { _ = try await plain.fetch("s3://\(Self.bucket)/k.png", cancel: CancellationFlag()) }
        #expect(e?.code == .invalidSource)
    }

    @Test func onlyTheAllowedBucketsAreRead() async throws {
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("x.png", data: Self.png)
        let source = "s3://\(Self.bucket)/\(prefix)/x.png"
        var env = Self.environment
        env["HALCYON_S3_SOURCE_BUCKETS"] = "some-other-bucket"
        let e = await Self.error { _ = try await Self.makeFetcher(environment: env).fetch(source, cancel: CancellationFlag()) }
        #expect(
            e?.code == .invalidSource && e?.permanent == true && e?.message.contains("HALCYON_S3_SOURCE_BUCKETS") == true, "\(String(describing: e))")
        env["HALCYON_S3_SOURCE_BUCKETS"] = "some-other-bucket,\(Self.bucket)"
        #expect(try await Self.makeFetcher(environment: env).fetch(source, cancel: CancellationFlag()).data == Self.png)
    }

    @Test func anObjectOverTheDownloadLimitIsRefused() async throws {
        let (s3, prefix) = try Self.writer()
        let big = try SampleImages.solid(width: 300, height: 300, red: 9, green: 9, blue: 9)
        _ = try await s3.put("big.png", data: big + Data(count: 20_000))
        let source = "s3://\(Self.bucket)/\(prefix)/big.png"
        let e = await Self.error { _ = try await Self.makeFetcher { $0.maxBytes = 10_000 }.fetch(sources: [source], cancel: CancellationFlag()) }
        let error = try #require(e)
        #expect(error.code == .tooLarge && error.permanent, "\(error)")
        #expect(error.message.contains("10000"), "\(error.message)")
    }

    @Test func anObjectThatIsNotAnImageIsNotImage() async throws {
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("page.html", data: Data("<html>hello</html>".utf8))
        let e = await Self.error { _ = try await Self.makeFetcher().fetch("s3://\(Self.bucket)/\(prefix)/page.html", cancel: CancellationFlag()) }
        #expect(e?.code == .notImage && e?.permanent == true)
    }

    @Test func anUnreachableEndpointIsTransientAndRetried() async throws {
        var env = Self.environment
        env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"
        let e = await Self.error {
            _ = try await Self.makeFetcher(environment: env, retries: 2).fetch(sources: ["s3://\(Self.bucket)/k.png"], cancel: CancellationFlag())
        }
        let error = try #require(e)
        #expect(error.code == .connection && !error.permanent, "\(error)")
        #expect(error.message.contains("after 3 attempts"), "\(error.message)")
    }

    @Test func aFailingHTTPSourceFallsBackToAnS3Object() async throws {
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("fallback.png", data: Self.png)
        let sources = [TestEnvironment.origin + "/status/404?s3-\(prefix)", "s3://\(Self.bucket)/\(prefix)/fallback.png"]
        let image = try await Self.makeFetcher { $0.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!]) }
            .fetch(sources: sources, cancel: CancellationFlag())
        #expect(image.data == Self.png && image.source == sources[1])
    }

    @Test func aCancelledFlagStopsTheDownload() async throws {
        // Raised before: no request at all.
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("x.png", data: Self.png)
        let early = CancellationFlag()
        early.cancel()
        let e1 = await Self.error { _ = try await Self.makeFetcher().fetch("s3://\(Self.bucket)/\(prefix)/x.png", cancel: early) }
        #expect(e1?.code == .cancelled)

        // Raised during the transfer: an endpoint that sends 100 KB at 50 bytes a second (the
        // test origin's /trickle, standing in for a slow S3 server: 2,000 s for the whole body).
        var env = Self.environment
        env["AWS_ENDPOINT_URL_S3"] = TestEnvironment.origin
        let fetcher = try Self.makeFetcher(environment: env) { $0.totalTimeout = .seconds(600) }
        let flag = CancellationFlag()
        let started = ContinuousClock.now
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { flag.cancel() }  // not on the busy cooperative pool
        let e2 = await Self.error { _ = try await fetcher.fetch("s3://trickle/50/100000", cancel: flag) }
        #expect(e2?.code == .cancelled, "\(String(describing: e2))")
        #expect(ContinuousClock.now - started < .seconds(120))  // under a busy test run

        // The GET's transfer itself stops (the fetcher's waiter detaches at once; this is the transfer).
        var settings = try S3Configuration(url: "s3://trickle", environment: env)
        settings.requestTimeout = .seconds(600)
        settings.maxAttempts = 1
        let client = try S3Client(configuration: settings)
        let cancel = CancellationFlag()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { cancel.cancel() }
        let start = ContinuousClock.now
        var outcome: HalcyonError?
        do {
            _ = try await client.get("50/100000", maxBytes: 1 << 20, cancel: cancel, errors: .source)
        } catch {
            outcome = error
        }
        let took = ContinuousClock.now - start
        #expect(outcome?.code == .cancelled, "\(String(describing: outcome))")
        #expect(took < .seconds(30), "the GET went on for \(took)")
    }

    @Test func concurrentFetchesOfOneObjectShareOneDownload() async throws {
        // The test origin as the endpoint: it counts requests (SeaweedFS does not). Path-style
        // `/slowfile/0.5/NAME` is bucket `slowfile`, key `0.5/NAME`.
        let name = "s3-coalesce-\(UUID().uuidString.prefix(8)).png"
        try Origin.publish(name, Self.png)
        var env = Self.environment
        env["AWS_ENDPOINT_URL_S3"] = TestEnvironment.origin
        let fetcher = try Self.makeFetcher(environment: env)
        let source = "s3://slowfile/0.5/\(name)"
        let results = try await withThrowingTaskGroup(of: Data.self) { group in
            for _ in 0..<4 { group.addTask { try await fetcher.fetch(source, cancel: CancellationFlag()).data } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results == Array(repeating: Self.png, count: 4))
        #expect(try Origin.counts()["/slowfile/0.5/\(name)"] == 1)
    }

    @Test func originalsAreRevalidatedWithTheETag() async throws {
        let (s3, prefix) = try Self.writer()
        _ = try await s3.put("orig.png", data: Self.png)
        let source = "s3://\(Self.bucket)/\(prefix)/orig.png"
        let store = try TestEnvironment.temporaryDirectory("s3-originals")
        let fetcher = try Self.makeFetcher {
            $0.originalsTTL = .seconds(3600)
            $0.originals = OriginalsStore(storeRoot: store)
        }
        #expect(try await fetcher.fetch(source, cancel: CancellationFlag()).data == Self.png)
        let cached = try #require(await OriginalsStore(storeRoot: store).original(for: source))
        #expect(cached.etag != nil)

        // Expired, with other bytes under the same ETag: a 304 keeps the cached bytes, which
        // proves no body was read.
        let marker = try SampleImages.solid(width: 5, height: 5, red: 200, green: 0, blue: 0)
        try await OriginalsStore(storeRoot: store).save(
            CachedOriginal(data: marker, etag: cached.etag, lastModified: nil, expires: Date().addingTimeInterval(-1)), for: source)
        #expect(try await fetcher.fetch(source, cancel: CancellationFlag()).data == marker)

        // Changed in S3: the new object replaces the cached one.
        let changed = try SampleImages.solid(width: 7, height: 7, red: 0, green: 0, blue: 200)
        _ = try await s3.put("orig.png", data: changed, ifNoneMatch: false)
        await OriginalsStore(storeRoot: store).refresh(source, until: Date().addingTimeInterval(-1))
        #expect(try await fetcher.fetch(source, cancel: CancellationFlag()).data == changed)
        #expect(await OriginalsStore(storeRoot: store).original(for: source)?.data == changed)
    }

    /// Not a check: how long one small object takes from SeaweedFS and from the test origin.
    @Test func latencyAgainstTheOrigin() async throws {
        let (s3, prefix) = try Self.writer()
        let jpeg = try SampleImages.photo(width: 320, height: 240, seed: 7)
        _ = try await s3.put("lat.jpg", data: jpeg)
        let name = "s3-lat-\(UUID().uuidString.prefix(8)).jpg"
        let url = try Origin.publish(name, jpeg)
        let fetcher = try Self.makeFetcher { $0.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!]) }
        func time(_ source: String) async throws -> Duration {
            _ = try await fetcher.fetch(source, cancel: CancellationFlag())
            let start = ContinuousClock.now
            for _ in 0..<50 { _ = try await fetcher.fetch(source, cancel: CancellationFlag()) }
            return (ContinuousClock.now - start) / 50
        }
        let viaS3 = try await time("s3://\(Self.bucket)/\(prefix)/lat.jpg")
        let viaHTTP = try await time(url)
        print("s3 source fetch latency: \(viaS3) per \(jpeg.count)-byte object; http origin: \(viaHTTP)")
    }
}
