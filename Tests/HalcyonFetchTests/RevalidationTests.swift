import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonRuntime
import HalcyonSamples
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The originals cache: fresh → no request; expired → conditional request; 304 → reuse.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (origin)"))
struct RevalidationTests {
    func makeFetcher(store: URL, ttl: Double) -> Fetcher {
        var c = FetchConfiguration()
        c.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!])
        c.originalsTTL = .milliseconds(Int64(ttl * 1000))
        c.originals = OriginalsStore(storeRoot: store)
        return Fetcher(configuration: c)
    }

    @Test func freshOriginalsAreReusedAndExpiredOnesRevalidated() async throws {
        let name = "reval-\(UUID().uuidString.prefix(8)).png"
        let png = try SampleImages.solid(width: 6, height: 6, red: 10, green: 20, blue: 30)
        let url = try Origin.publish(name, png)
        let path = "/files/\(name)"
        let store = try TestEnvironment.temporaryDirectory("originals")
        let fetcher = makeFetcher(store: store, ttl: 3600)

        #expect(try await fetcher.fetch(url, cancel: CancellationFlag()).data == png)
        #expect(try Origin.counts()[path] == 1)
        #expect(try await fetcher.fetch(url, cancel: CancellationFlag()).data == png)
        #expect(try Origin.counts()[path] == 1, "a fresh original is used without a request")

        // Let it expire (the store keeps the expiry in the file's mtime).
        await OriginalsStore(storeRoot: store).refresh(url, until: Date().addingTimeInterval(-1))
        #expect(try await fetcher.fetch(url, cancel: CancellationFlag()).data == png)
        let counts = try Origin.counts()
        #expect(counts[path] == 2)
        #expect(counts["304 " + path] == 1, "the expired original was revalidated and reused")

        // Fresh again after the 304: no request.
        #expect(try await fetcher.fetch(url, cancel: CancellationFlag()).data == png)
        #expect(try Origin.counts()[path] == 2)
    }

    @Test func aChangedOriginReplacesTheCachedOriginal() async throws {
        let name = "reval-\(UUID().uuidString.prefix(8)).png"
        let old = try SampleImages.solid(width: 6, height: 6, red: 1, green: 1, blue: 1)
        let new = try SampleImages.solid(width: 6, height: 6, red: 250, green: 1, blue: 1)
        let url = try Origin.publish(name, old)
        let store = try TestEnvironment.temporaryDirectory("originals")
        let fetcher = makeFetcher(store: store, ttl: 3600)
        #expect(try await fetcher.fetch(url, cancel: CancellationFlag()).data == old)
        try Origin.publish(name, new)
        await OriginalsStore(storeRoot: store).refresh(url, until: Date().addingTimeInterval(-1))
        #expect(try await fetcher.fetch(url, cancel: CancellationFlag()).data == new)
        #expect(try Origin.counts()["304 /files/\(name)"] == nil)
        #expect(await OriginalsStore(storeRoot: store).original(for: url)?.data == new)
    }

    @Test func withoutATTLNothingIsKept() async throws {
        let name = "reval-\(UUID().uuidString.prefix(8)).png"
        let url = try Origin.publish(name, try SampleImages.solid(width: 6, height: 6, red: 5, green: 5, blue: 5))
        let store = try TestEnvironment.temporaryDirectory("originals")
        let fetcher = makeFetcher(store: store, ttl: 0)
        _ = try await fetcher.fetch(url, cancel: CancellationFlag())
        _ = try await fetcher.fetch(url, cancel: CancellationFlag())
        #expect(try Origin.counts()["/files/\(name)"] == 2)
        #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("originals").path))
    }
}
