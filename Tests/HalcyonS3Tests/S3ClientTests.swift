import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3
import HalcyonTestSupport
import Synchronization
import Testing

/// The client against a real S3 server: SeaweedFS, started by `scripts/test`.
@Suite(.enabled(if: TestEnvironment.s3Available, "needs scripts/test (SeaweedFS)"))
struct S3ClientTests {
    /// A client on the test bucket under a prefix of its own (tests share the bucket).
    static func client(prefix: String = "t-\(UUID().uuidString.prefix(8))", secret: String? = nil, attempts: Int = 4) throws -> S3Client {
        var config = try S3Configuration(
            url: "s3://\(TestEnvironment.s3Bucket)/\(prefix)",
            environment: [
                "AWS_ACCESS_KEY_ID": TestEnvironment.s3AccessKey, "AWS_SECRET_ACCESS_KEY": secret ?? TestEnvironment.s3SecretKey,
                "AWS_ENDPOINT_URL_S3": TestEnvironment.s3Endpoint,
            ])
        config.maxAttempts = attempts
        return try S3Client(configuration: config)
    }

    /// Runs `body` `count` times at once, as tasks of a group (each request's transfer on an I/O
    /// thread of its own).
    static func race<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) async -> T) async -> [T] {
        await withTaskGroup(of: T.self) { group in
            for i in 0..<count { group.addTask { await body(i) } }
            var results: [T] = []
            for await result in group { results.append(result) }
            return results
        }
    }

    @Test func putGetHeadDeleteRoundTripWithMetadata() async throws {
        let s3 = try Self.client()
        let data = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let meta = ["source": "https://example.com/a.jpg", "chain": "resize(320x320, mode=fill)", "expires-at": "2026-12-01T00:00:00Z"]
        let put = try await s3.put("objects/ab/cd/x.webp", data: data, contentType: "image/webp", metadata: meta)
        guard case .created(let etag) = put else {
            Issue.record("expected .created, got \(put)")
            return
        }
        #expect(etag != nil)

        let head = try #require(try await s3.head("objects/ab/cd/x.webp"))
        #expect(head.size == data.count)
        #expect(head.contentType == "image/webp")
        #expect(head.metadata == meta)
        #expect(head.etag == etag)
        #expect(abs(try #require(head.lastModified).timeIntervalSinceNow) < 120)

        let got = try #require(try await s3.get("objects/ab/cd/x.webp", maxBytes: 1 << 20))
        #expect(got.data == data)
        #expect(got.info.metadata == meta)
        #expect(got.info.etag == etag)

        try await s3.delete("objects/ab/cd/x.webp")
        #expect(try await s3.head("objects/ab/cd/x.webp") == nil)
        #expect(try await s3.get("objects/ab/cd/x.webp", maxBytes: 1 << 20) == nil)
        // Deleting what is not there is no error.
        try await s3.delete("objects/ab/cd/x.webp")
    }

    @Test func putNeverOverwrites() async throws {
        let s3 = try Self.client()
        #expect(try await s3.put("k", data: Data("first".utf8)) != .alreadyExists)
        #expect(try await s3.put("k", data: Data("second".utf8)) == .alreadyExists)
        #expect(try await s3.get("k", maxBytes: 100)?.data == Data("first".utf8))
        // Without the condition it replaces.
        #expect(try await s3.put("k", data: Data("third".utf8), ifNoneMatch: false) != .alreadyExists)
        #expect(try await s3.get("k", maxBytes: 100)?.data == Data("third".utf8))
    }

    /// 16 writers race for one key with `If-None-Match: *`: exactly one creates it, and its bytes are what is stored.
    @Test func sixteenConcurrentWritersExactlyOneCreates() async throws {
        let s3 = try Self.client()
        for round in 0..<3 {
            let key = "race-\(round)"
            let results = await Self.race(16) { i -> (Int, Result<S3PutResult, HalcyonError>) in
                do throws(HalcyonError) {
                    return (i, .success(try await s3.put(key, data: Data("writer \(i)".utf8))))
                } catch {
                    return (i, .failure(error))
                }
            }
            let winners = results.filter { if case .success(.created) = $0.1 { return true } else { return false } }
            let losers = results.filter { if case .success(.alreadyExists) = $0.1 { return true } else { return false } }
            #expect(winners.count == 1, "round \(round): \(results.map { "\($0.0): \($0.1)" })")
            #expect(losers.count == 15)
            let stored = try #require(try await s3.get(key, maxBytes: 100))
            #expect(stored.data == Data("writer \(winners.first?.0 ?? -1)".utf8))
        }
    }

    /// What SeaweedFS 4.48 does with a self-copy under `REPLACE`: the bytes stay, the metadata is
    /// replaced, the ETag (an MD5 of the bytes for a single-part object) stays the same. A copy
    /// guarded by a stale ETag is refused (412) and changes nothing.
    @Test func copyMetadataReplacesMetadataAndKeepsBytes() async throws {
        let s3 = try Self.client()
        let data = Data(repeating: 7, count: 5000)
        _ = try await s3.put("m", data: data, contentType: "image/png", metadata: ["a": "1", "b": "2"])
        let before = try #require(try await s3.head("m"))

        let result = try await s3.copyMetadata("m", metadata: ["a": "10", "c": "3"])
        guard case .replaced = result else {
            Issue.record("expected .replaced, got \(result)")
            return
        }
        let after = try #require(try await s3.head("m"))
        #expect(after.metadata == ["a": "10", "c": "3"])
        #expect(after.contentType == "image/png")
        #expect(after.size == data.count)
        #expect(after.etag == before.etag)
        #expect(try await s3.get("m", maxBytes: 10_000)?.data == data)

        // A stale ETag: the object changed since it was read.
        #expect(try await s3.copyMetadata("m", metadata: ["z": "9"], ifMatch: "\"0123456789abcdef0123456789abcdef\"") == .changedConcurrently)
        #expect(try await s3.head("m")?.metadata == ["a": "10", "c": "3"])
        #expect(try await s3.copyMetadata("absent", metadata: ["z": "9"]) == .notFound)
    }

    @Test func listsTwentyFiveHundredKeysInPagesOfAThousand() async throws {
        let s3 = try Self.client()
        let keys = (0..<2500).map { String(format: "many/%05d", $0) }
        // Written 16 at a time.
        let chunks = stride(from: 0, to: keys.count, by: 157).map { Array(keys[$0..<min($0 + 157, keys.count)]) }
        let failures = await Self.race(chunks.count) { i in
            var failed: [String] = []
            for key in chunks[i] {
                do { _ = try await s3.put(key, data: Data(key.utf8)) } catch { failed.append("\(key): \(error)") }
            }
            return failed
        }.flatMap { $0 }
        #expect(failures.isEmpty, "\(failures.prefix(3))")
        _ = try await s3.put("other/x", data: Data("x".utf8))

        var pages: [[S3ListEntry]] = []
        var token: String?
        repeat {
            let page = try await s3.list(prefix: "many/", continuationToken: token, maxKeys: 1000)
            pages.append(page.entries)
            token = page.nextContinuationToken
        } while token != nil && pages.count < 10
        #expect(pages.map(\.count) == [1000, 1000, 500])
        let listed = pages.flatMap { $0 }
        #expect(listed.map(\.key) == keys)
        #expect(listed.allSatisfy { $0.size == 10 && $0.lastModified != nil })
        #expect(try await s3.list(prefix: "nothing-here/").entries.isEmpty)
    }

    @Test func presignedURLWorksWithoutCredentialsAndExpires() async throws {
        let s3 = try Self.client()
        _ = try await s3.put("shared/a b+c.txt", data: Data("presigned body".utf8), contentType: "text/plain")
        let url = try s3.presignedGetURL("shared/a b+c.txt", expires: .seconds(2))
        #expect(!url.absoluteString.contains(TestEnvironment.s3SecretKey))
        // A plain HTTP client (the test origin's, libcurl, no credentials).
        #expect(try Origin.get(url.absoluteString) == "presigned body")
        // Tampered: refused.
        let tampered = url.absoluteString.replacingOccurrences(of: "a%20b%2Bc.txt", with: "a%20b%2Bd.txt")
        #expect { _ = try Origin.get(tampered) } throws: { "\($0)".contains("HTTP 403") }
        try await Task.sleep(for: .milliseconds(3200))
        #expect { _ = try Origin.get(url.absoluteString) } throws: { "\($0)".contains("HTTP 403") }
        // Expiry bounds.
        #expect { _ = try s3.presignedGetURL("k", expires: .zero) } throws: { ($0 as? HalcyonError)?.code == .invalidOptions }
        #expect { _ = try s3.presignedGetURL("k", expires: .seconds(604_801)) } throws: { ($0 as? HalcyonError)?.code == .invalidOptions }
    }

    @Test func aWrongSecretIsAccessDeniedWithoutTheSecret() async throws {
        let secret = "WRONG-secret-\(UUID().uuidString)"
        let s3 = try Self.client(secret: secret)
        for op in ["put", "get", "head", "list"] {
            do {
                switch op {
                case "put": _ = try await s3.put("k", data: Data("x".utf8))
                case "get": _ = try await s3.get("k", maxBytes: 10)
                case "head": _ = try await s3.head("k")
                default: _ = try await s3.list()
                }
                Issue.record("\(op) succeeded with a wrong secret")
            } catch {
                #expect(error.code == .accessDenied, "\(op): \(error)")
                let everything = "\(error) \(error.detail ?? "") \(error.source ?? "") \(String(reflecting: error))"
                #expect(!everything.contains(secret))
                #expect(!everything.contains(TestEnvironment.s3SecretKey))
                #expect(!everything.contains(TestEnvironment.s3AccessKey))
                if op != "head" { #expect(error.message.contains("SignatureDoesNotMatch"), "\(error)") }
            }
        }
    }

    @Test func getRefusesAnObjectOverItsBound() async throws {
        let s3 = try Self.client()
        _ = try await s3.put("big", data: Data(repeating: 1, count: 300_000))
        await #expect { _ = try await s3.get("big", maxBytes: 299_999) } throws: {
            guard let e = $0 as? HalcyonError else { return false }
            return e.code == .storeTooLarge && e.message.contains("299999")
        }
        #expect(try await s3.get("big", maxBytes: 300_000)?.data.count == 300_000)
        // A missing object is nil even when its error body would not fit the bound.
        #expect(try await s3.get("missing", maxBytes: 1) == nil)
    }

    /// Ranged GETs (how the dashboard streams a result from a bucket): each answer is exactly the
    /// range, the last one clipped at the object's end; with the ETag read first, a replaced or
    /// deleted object gives no bytes (`.changed`, or `.notFound`).
    @Test func rangedGetsReadExactlyTheRangeOfTheObjectTheyStartedOn() async throws {
        let s3 = try Self.client()
        let data = Data((0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 8) })
        _ = try await s3.put("ranged", data: data)
        guard case .bytes(let first, let info) = try await s3.get("ranged", range: 0..<300_000) else {
            Issue.record("no first range")
            return
        }
        #expect(first == data[0..<300_000] && info.size == data.count)
        let etag = try #require(info.etag)
        var read = first
        for start in stride(from: 300_000, to: data.count, by: 300_000) {
            guard case .bytes(let chunk, let i) = try await s3.get("ranged", range: start..<(start + 300_000), ifMatch: etag) else {
                Issue.record("range from \(start) not read")
                return
            }
            #expect(i.etag == etag && i.size == data.count)
            read.append(chunk)
        }
        #expect(read == data, "the last range is clipped at the end: \(read.count) bytes")
        // A range past the end, a stale ETag, a replaced object, a deleted one.
        guard case .changed = try await s3.get("ranged", range: 1_000_000..<1_000_010, ifMatch: etag) else {
            Issue.record("past the end")
            return
        }
        guard case .changed = try await s3.get("ranged", range: 0..<10, ifMatch: "\"0123456789abcdef0123456789abcdef\"") else {
            Issue.record("a stale ETag read bytes")
            return
        }
        _ = try await s3.put("ranged", data: Data(repeating: 7, count: 1_000_000), ifNoneMatch: false)
        guard case .changed = try await s3.get("ranged", range: 300_000..<600_000, ifMatch: etag) else {
            Issue.record("a replaced object read bytes")
            return
        }
        try await s3.delete("ranged")
        // RFC 9110 has If-Match fail (412) when there is no object; a server may say 404 first.
        if case .bytes = try await s3.get("ranged", range: 300_000..<600_000, ifMatch: etag) { Issue.record("a deleted object read bytes") }
        guard case .notFound = try await s3.get("ranged", range: 0..<10) else {
            Issue.record("a deleted object without If-Match")
            return
        }
    }

    @Test(arguments: [
        "with space.jpg", "ünïcödé/日本語/ключ.png", "plus+sign+.gif", "tilde~and=equals&amp;.webp", "percent%20literal", "(parens)!*'$,;:@",
    ])
    func keysWithAwkwardCharactersRoundTrip(key: String) async throws {
        let s3 = try Self.client()
        let body = Data("body of \(key)".utf8)
        #expect(try await s3.put(key, data: body, metadata: ["k": "v"]) != .alreadyExists)
        #expect(try await s3.head(key)?.size == body.count)
        #expect(try await s3.get(key, maxBytes: 1000)?.data == body)
        #expect(try await s3.list().entries.map(\.key) == [key])
        #expect(try Origin.get(s3.presignedGetURL(key, expires: .seconds(60)).absoluteString) == String(decoding: body, as: UTF8.self))
        try await s3.delete(key)
        #expect(try await s3.head(key) == nil)
    }

    /// Where SeaweedFS 4.48 (a filer underneath) differs from AWS, which keeps keys byte for byte:
    /// repeated slashes are folded (`a//b` is stored and listed as `a/b`) and a key with `.` or
    /// `..` segments is refused with 400 `InvalidRequest` — which the client reports as a
    /// permanent `store.write_failed`, not retried. (The store backend's keys have neither.)
    @Test func seaweedFSFoldsSlashesAndRefusesDotSegments() async throws {
        let s3 = try Self.client()
        #expect(try await s3.put("a//b", data: Data("x".utf8)) != .alreadyExists)
        #expect(try await s3.list().entries.map(\.key) == ["a/b"])
        await #expect { _ = try await s3.put("dir/../x", data: Data("x".utf8)) } throws: {
            guard let e = $0 as? HalcyonError else { return false }
            return e.code == .writeFailed && e.permanent && e.message.contains("HTTP 400")
        }
    }

    @Test func refusesKeysAndMetadataOverS3Limits() async throws {
        let s3 = try Self.client(prefix: "")
        let longKey = String(repeating: "k", count: 1025)
        await #expect { _ = try await s3.put(longKey, data: Data()) } throws: { ($0 as? HalcyonError)?.code == .writeFailed }
        await #expect { _ = try await s3.get(longKey, maxBytes: 1) } throws: { ($0 as? HalcyonError)?.code == .readFailed }
        await #expect { _ = try await s3.put("", data: Data()) } throws: { ($0 as? HalcyonError)?.code == .writeFailed }
        let bigMeta = ["m": String(repeating: "v", count: 2048)]
        await #expect { _ = try await s3.put("k", data: Data(), metadata: bigMeta) } throws: {
            ($0 as? HalcyonError)?.message.contains("2048") == true
        }
        await #expect { _ = try await s3.put("k", data: Data(), metadata: ["Upper": "x"]) } throws: { ($0 as? HalcyonError)?.code == .writeFailed }
        await #expect { _ = try await s3.put("k", data: Data(), metadata: ["n": "line\nbreak"]) } throws: {
            ($0 as? HalcyonError)?.code == .writeFailed
        }
    }

    /// Nothing listens: connection errors are retried, then reported as the operation's code.
    @Test func connectionErrorsAreRetriedThenReported() async throws {
        let s3 = try S3ConfigurationTests.unreachableClient(attempts: 3, retryBaseDelay: .milliseconds(20))
        let started = ContinuousClock.now
        await #expect { _ = try await s3.head("k") } throws: {
            guard let e = $0 as? HalcyonError else { return false }
            return e.code == .readFailed && !e.permanent && e.message.contains("after 3 tries")
        }
        await #expect { _ = try await s3.put("k", data: Data()) } throws: { ($0 as? HalcyonError)?.code == .writeFailed }
        #expect(ContinuousClock.now - started < .seconds(30))  // retries 20 ms apart, not the default back-off
    }
}
