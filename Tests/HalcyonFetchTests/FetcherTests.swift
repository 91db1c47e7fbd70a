import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// Retries, fallbacks, coalescing and the SSRF guard against the real test origin.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (origin)"))
struct FetcherTests {
    static let png: Data = try! SampleImages.solid(width: 8, height: 8, red: 1, green: 200, blue: 3)

    static func makeFetcher(
        retries: Int = 2, allow: [String] = ["127.0.0.1/32"], concurrency: Int = 8,
        tweak: (inout FetchConfiguration) -> Void = { _ in }
    ) -> Fetcher {
        var c = FetchConfiguration()
        c.totalTimeout = .seconds(5)
        c.connectTimeout = .seconds(2)
        c.addressPolicy = AddressPolicy(allowed: allow.compactMap(CIDR.init))
        c.retry = DelayRetryStrategy(maxRetries: retries, interval: .fixed(0.05))
        tweak(&c)
        return Fetcher(configuration: c, concurrency: concurrency)
    }

    func unique(_ name: String) -> String { "\(name)-\(UUID().uuidString.prefix(8))" }

    func requests(_ path: String) throws -> Int { try Origin.counts()[path] ?? 0 }

    @Test func retriesTransientFailuresThenSucceeds() async throws {
        try Origin.publish("fetcher.png", Self.png)
        let key = unique("r500")
        let path = "/fail/2/500/\(key)/fetcher.png"
        let image = try await Self.makeFetcher().fetch(sources: [TestEnvironment.origin + path], cancel: CancellationFlag())
        #expect(image.data == Self.png)
        #expect(try requests(path) == 3)
    }

    @Test func givesUpAfterItsRetriesWithTheAttemptCount() async throws {
        try Origin.publish("fetcher.png", Self.png)
        let a = TestEnvironment.origin + "/fail/9/503/\(unique("a"))/fetcher.png"
        let b = TestEnvironment.origin + "/status/404?\(unique("b"))"
        await #expect {
            _ = try await Self.makeFetcher(retries: 2).fetch(sources: [a, b], cancel: CancellationFlag())
        } throws: { error in
            guard let e = error as? HalcyonError, e.code == .sourcesExhausted else { return false }
            // One source failed transiently, so the job may succeed later.
            return e.permanent == false && e.sources.map(\.attempts) == [3, 1]
                && e.sources.map(\.code) == [.httpStatus, .httpStatus] && e.sources.map(\.permanent) == [false, true]
        }
    }

    @Test func neverRetriesPermanentFailures() async throws {
        let path = "/status/404?\(unique("p"))"
        await #expect(throws: HalcyonError.self) {
            _ = try await Self.makeFetcher(retries: 5).fetch(sources: [TestEnvironment.origin + path], cancel: CancellationFlag())
        }
        #expect(try requests(path) == 1)
        let notImage = "/notimage?\(unique("n"))"
        await #expect(throws: HalcyonError.self) {
            _ = try await Self.makeFetcher(retries: 5).fetch(sources: [TestEnvironment.origin + notImage], cancel: CancellationFlag())
        }
        #expect(try requests(notImage) == 1)
    }

    /// A job's `options.retry` may ask for 20 retries an hour apart; an attempt never waits
    /// past `maxRetryWait` in total — the job is retried later instead, holding nothing.
    @Test func retriesStopAtTheWaitBudget() async throws {
        let path = "/status/503?\(unique("budget"))"
        let fetcher = Self.makeFetcher { $0.maxRetryWait = .seconds(1) }
        let started = ContinuousClock.now
        await #expect {
            _ = try await fetcher.fetch(
                sources: [TestEnvironment.origin + path], retry: DelayRetryStrategy(RetryOptions(max: 20, interval: 3600, backoff: .fixed)),
                cancel: CancellationFlag())
        } throws: { error in
            guard let e = error as? HalcyonError else { return false }
            return e.code == .httpStatus && !e.permanent && e.message.contains("retries stopped")
        }
        // One request, no retry (a loaded suite makes the clock a loose witness: 120 s of 20 h).
        #expect(ContinuousClock.now - started < .seconds(120))
        #expect(try requests(path) == 1)
        // Within the budget, retries happen as asked.
        let counted = "/status/503?\(unique("within"))"
        await #expect(throws: HalcyonError.self) {
            _ = try await Self.makeFetcher { $0.maxRetryWait = .seconds(1) }.fetch(
                sources: [TestEnvironment.origin + counted], retry: DelayRetryStrategy(RetryOptions(max: 3, interval: 0.1, backoff: .fixed)),
                cancel: CancellationFlag())
        }
        #expect(try requests(counted) == 4)
    }

    /// `halcyon cancel` (or a shutdown) ends a retry's wait at once; it used to sleep it out.
    @Test func aRetryWaitEndsWhenTheJobIsCancelled() async throws {
        let flag = CancellationFlag()
        let fetcher = Self.makeFetcher()
        let started = ContinuousClock.now
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { flag.cancel() }
        await #expect(throws: HalcyonError.self) {
            _ = try await fetcher.fetch(
                sources: [TestEnvironment.origin + "/status/503?\(unique("cancel"))"],
                retry: DelayRetryStrategy(RetryOptions(max: 5, interval: 3600, backoff: .fixed)), cancel: flag)
        }
        #expect(ContinuousClock.now - started < .seconds(300), "the wait was for an hour")
    }

    @Test func honoursRetryAfter() async throws {
        try Origin.publish("fetcher.png", Self.png)
        let started = ContinuousClock.now
        let image = try await Self.makeFetcher(retries: 1).fetch(
            sources: [TestEnvironment.origin + "/retry-after/1/\(unique("ra"))/fetcher.png"], cancel: CancellationFlag())
        #expect(image.data == Self.png)
        #expect(ContinuousClock.now - started >= .seconds(1))
    }

    @Test func concurrentRequestsForOneURLShareOneDownload() async throws {
        try Origin.publish("fetcher.png", Self.png)
        let path = "/slowfile/2/fetcher.png?\(unique("c"))"
        let fetcher = Self.makeFetcher()
        let results = try await withThrowingTaskGroup(of: Data.self) { group in
            for _ in 0..<20 {
                group.addTask { try await fetcher.fetch(sources: [TestEnvironment.origin + path], cancel: CancellationFlag()).data }
            }
            return try await group.reduce(into: [Data]()) { $0.append($1) }
        }
        #expect(results.count == 20 && results.allSatisfy { $0 == Self.png })
        #expect(try requests(path) == 1)
    }

    @Test func aCancelledWaiterDetachesWithoutAbortingTheOthers() async throws {
        try Origin.publish("fetcher.png", Self.png)
        let path = "/slowfile/1/fetcher.png?\(unique("d"))"
        let fetcher = Self.makeFetcher()
        let quitter = CancellationFlag()
        let stays = Task { try await fetcher.fetch(sources: [TestEnvironment.origin + path], cancel: CancellationFlag()) }
        let leaves = Task { try await fetcher.fetch(sources: [TestEnvironment.origin + path], cancel: quitter) }
        try await Task.sleep(for: .milliseconds(300))
        quitter.cancel()
        await #expect(throws: HalcyonError.self) { _ = try await leaves.value }
        #expect(try await stays.value.data == Self.png)
        #expect(try requests(path) == 1)
    }

    @Test func theLastWaiterLeavingAbortsTheDownload() async throws {
        let fetcher = Self.makeFetcher { $0.totalTimeout = .seconds(600) }
        let flag = CancellationFlag()
        let started = ContinuousClock.now
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { flag.cancel() }  // not on the busy cooperative pool
        await #expect {
            _ = try await fetcher.fetch(sources: [TestEnvironment.origin + "/trickle/20/100000?\(unique("t"))"], cancel: flag)
        } throws: { ($0 as? HalcyonError)?.code == .cancelled }
        #expect(ContinuousClock.now - started < .seconds(120))  // vs 5000 s for the whole trickle (and a 600 s timeout), under a busy test run
        try await Task.sleep(for: .seconds(1.5))
        #expect(fetcher.downloadsInFlight == 0)
    }

    @Test func ssrfGuardRefusesLoopbackUnlessAllowed() async throws {
        try Origin.publish("fetcher.png", Self.png)
        let url = TestEnvironment.origin + "/files/fetcher.png?\(unique("s"))"
        await #expect {
            _ = try await Self.makeFetcher(allow: []).fetch(sources: [url], cancel: CancellationFlag())
        } throws: { error in
            let e = error as? HalcyonError
            return e?.code == .blockedAddress && e?.message.contains("loopback") == true && e?.permanent == true
        }
        // Refused before connecting: the origin never saw it.
        #expect(try requests(String(url.dropFirst(TestEnvironment.origin.count))) == 0)
        _ = try await Self.makeFetcher(allow: ["127.0.0.1/32"]).fetch(sources: [url], cancel: CancellationFlag())
    }

    @Test func ssrfGuardChecksEveryRedirect() async throws {
        // Allowed: 127.0.0.1. The redirect goes to 127.0.0.2, which is loopback but not allowed.
        let port = TestEnvironment.origin.split(separator: ":").last!
        let target = "http://127.0.0.2:\(port)/files/fetcher.png"
        await #expect {
            _ = try await Self.makeFetcher().fetch(sources: [TestEnvironment.origin + "/redirect?to=\(target)"], cancel: CancellationFlag())
        } throws: { error in
            let e = error as? HalcyonError
            return e?.code == .blockedAddress && e?.message.contains("127.0.0.2") == true
        }
    }

    @Test func limitsYieldTheirCodes() async throws {
        let o = TestEnvironment.origin
        // The low-speed limit is tight only where it is the case: on a loaded machine the origin
        // can take over a second to send a fast response's first byte.
        func fetcher(lowSpeedTime: Duration) -> Fetcher {
            Self.makeFetcher(retries: 0) {
                $0.maxBytes = 1 << 20; $0.totalTimeout = lowSpeedTime * 2; $0.lowSpeedTime = lowSpeedTime; $0.lowSpeedBytes = 1000
            }
        }
        let tight = fetcher(lowSpeedTime: .seconds(1)), loose = fetcher(lowSpeedTime: .seconds(15))
        let cases: [(String, ErrorCode, Fetcher)] = [
            ("/huge/5000000", .tooLarge, loose),  // no Content-Length: stopped while streaming
            ("/trickle/10/100000", .timeout, tight),  // below the low-speed limit
            ("/redirect-loop/0", .tooManyRedirects, loose),
            ("/redirect?to=file:///etc/passwd", .blockedAddress, loose),
            ("/notimage", .notImage, loose),
            ("/truncated/fetcher.png", .connection, loose),
        ]
        try Origin.publish("fetcher.png", Self.png)
        for (path, code, fetcher) in cases {
            await #expect {
                _ = try await fetcher.fetch(sources: [o + path + (path.contains("?") ? "&" : "?") + unique("l")], cancel: CancellationFlag())
            } throws: { ($0 as? HalcyonError)?.code == code }
        }
    }

    @Test func sendsJobHeadersAndItsUserAgent() throws {
        var c = FetchConfiguration()
        c.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1")!])
        let body = try HTTPClient(configuration: c).get(
            URL(string: TestEnvironment.origin + "/_headers")!,
            headers: ["X-Trace": "abc123", "Authorization": "Bearer t"],
            cancel: CancellationFlag()
        ).body
        let headers = try #require(JSONValue.parse(String(decoding: body, as: UTF8.self)))
        #expect(headers["x-trace"]?.stringValue == "abc123")
        #expect(headers["authorization"]?.stringValue == "Bearer t")
        #expect(headers["user-agent"]?.stringValue?.hasPrefix("Halcyon/") == true)
    }

    @Test func measureDownloadRates() async throws {
        try Origin.publish("rate.png", Self.png)
        var line = "downloads/s for 1000 small images:"
        for concurrency in [1, 8, 64] {
            let fetcher = Self.makeFetcher(concurrency: concurrency)
            let tag = unique("rate\(concurrency)")
            let started = ContinuousClock.now
            let ok = try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<1000 {
                    group.addTask {
                        try await fetcher.fetch(sources: ["\(TestEnvironment.origin)/files/rate.png?\(tag)&i=\(i)"], cancel: CancellationFlag()).data
                            == Self.png
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(ok == 1000)
            let seconds = (ContinuousClock.now - started).seconds
            line += " concurrency \(concurrency): \(Int(1000 / seconds))"
        }
        print(line)
    }
}
