import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@Suite struct SourceTests {
    @Test func parsesEachKind() throws {
        #expect(try Source.parse("https://example.com/a.jpg") == .network(URL(string: "https://example.com/a.jpg")!))
        #expect(try Source.parse("file:///srv/images/a.png") == .file(path: "/srv/images/a.png"))
        #expect(try Source.parse("data:image/png;base64,AAEC") == .data(mediaType: "image/png", bytes: Data([0, 1, 2])))
    }

    @Test(arguments: [
        "ftp://example.com/a.jpg", "", "example.com/a.jpg", "http://", "file://host/etc/passwd", "data:image/png;base64", "javascript:alert(1)",
    ])
    func rejectsWhatCannotBeFetched(source: String) {
        #expect { _ = try Source.parse(source) } throws: { ($0 as? HalcyonError)?.code == .invalidSource }
    }

    @Test func capsDataURLs() {
        let big = "data:image/png;base64," + String(repeating: "A", count: 4000)
        #expect { _ = try Source.parse(big, maxDataBytes: 1000) } throws: { ($0 as? HalcyonError)?.code == .tooLarge }
    }

    @Test func cacheKeyDefaultsToTheSource() {
        #expect(cacheKey(source: "http://a/b", explicit: nil) == "http://a/b")
        #expect(cacheKey(source: "http://a/b", explicit: "") == "http://a/b")
        #expect(cacheKey(source: "http://a/b", explicit: "img-1") == "img-1")
    }
}

@Suite struct FileSourceTests {
    @Test func readsOnlyBeneathARootEvenThroughSymlinks() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("roots-\(UUID().uuidString.prefix(8))")
        let root = base.appendingPathComponent("root"), outside = base.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        let png = try SampleImages.solid(width: 4, height: 4, red: 1, green: 2, blue: 3)
        try png.write(to: root.appendingPathComponent("in.png"))
        try png.write(to: outside.appendingPathComponent("secret.png"))
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("escape.png"), withDestinationURL: outside.appendingPathComponent("secret.png"))

        var c = FetchConfiguration()
        c.fileRoots = [root.path]
        let fetcher = Fetcher(configuration: c)
        let ok = try await fetcher.fetch("file://" + root.appendingPathComponent("in.png").path, cancel: CancellationFlag())
        #expect(ok.format == .png && ok.data == png)
        for path in [
            outside.appendingPathComponent("secret.png").path, root.appendingPathComponent("escape.png").path,
            root.path + "/../outside/secret.png", base.path + "/root-sibling.png",
        ] {
            await #expect { _ = try await fetcher.fetch("file://" + path, cancel: CancellationFlag()) } throws: {
                ($0 as? HalcyonError)?.code == .invalidSource
            }
        }
        await #expect { _ = try await fetcher.fetch("file://" + root.appendingPathComponent("nope.png").path, cancel: CancellationFlag()) } throws: {
            ($0 as? HalcyonError)?.code == .fileNotFound
        }
        // Without roots, file sources are off.
        await #expect {
            _ = try await Fetcher(configuration: FetchConfiguration()).fetch(
                "file://" + root.appendingPathComponent("in.png").path, cancel: CancellationFlag())
        } throws: {
            ($0 as? HalcyonError)?.code == .invalidSource
        }
    }
}

@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (origin)"))
struct HTTPFetchTests {
    let fetcher: Fetcher = {
        var c = FetchConfiguration()
        c.totalTimeout = .seconds(3)
        c.connectTimeout = .seconds(2)
        c.maxBytes = 2 << 20
        c.addressPolicy = AddressPolicy(allowed: [CIDR("127.0.0.1/32")!])
        return Fetcher(configuration: c)
    }()

    func expectCode(_ url: String, _ code: ErrorCode, permanent: Bool? = nil) async {
        await #expect {
            _ = try await fetcher.fetch(url, cancel: CancellationFlag())
        } throws: { error in
            guard let e = error as? HalcyonError else { return false }
            return e.code == code && (permanent == nil || e.permanent == permanent) && e.source == url
        }
    }

    @Test func fetchesAnImageAndSniffsItsFormat() async throws {
        let png = try SampleImages.solid(width: 8, height: 8, red: 9, green: 9, blue: 9)
        let url = try Origin.publish("fetch-ok.png", png)
        let got = try await fetcher.fetch(url, cancel: CancellationFlag())
        #expect(got.data == png)
        #expect(got.format == .png)
        #expect(got.source == url)
    }

    @Test func statusCodesAreCategorised() async {
        let o = TestEnvironment.origin
        await expectCode("\(o)/status/404", .httpStatus, permanent: true)
        await expectCode("\(o)/status/403", .httpStatus, permanent: true)
        await expectCode("\(o)/status/503", .httpStatus, permanent: false)
        await expectCode("\(o)/status/500", .httpStatus, permanent: false)
        await expectCode("\(o)/status/429", .httpStatus, permanent: false)
        await expectCode("\(o)/status/408", .httpStatus, permanent: false)
    }

    @Test func guardsAndLimits() async {
        let o = TestEnvironment.origin
        await expectCode("\(o)/notimage", .notImage, permanent: true)
        await expectCode("\(o)/slow/10", .timeout, permanent: false)
        await expectCode("\(o)/huge/10000000", .tooLarge, permanent: true)
        await expectCode("\(o)/redirect-loop/0", .tooManyRedirects, permanent: true)
        await expectCode("\(o)/redirect?to=file:///etc/passwd", .blockedAddress, permanent: true)
        await expectCode("http://127.0.0.1:1/nothing-listens", .connection, permanent: false)
    }

    /// Over IPv6 the guard judges the address connected to, `::1`: refused by default (and by
    /// an allowance for IPv4's loopback), fetched once `::1/128` is allowed.
    @Test(.enabled(if: TestEnvironment.ipv6Loopback, "needs IPv6 loopback"))
    func ipv6LoopbackIsJudgedAsItself() async throws {
        let png = try SampleImages.solid(width: 6, height: 6, red: 1, green: 60, blue: 9)
        try Origin.publish("fetch-v6.png", png)
        let url = "\(TestEnvironment.originIPv6)/files/fetch-v6.png"
        func fetcher(_ allowed: [String]) -> Fetcher {
            var c = FetchConfiguration()
            c.totalTimeout = .seconds(10)
            c.addressPolicy = AddressPolicy(allowed: allowed.compactMap(CIDR.init))
            return Fetcher(configuration: c)
        }
        for allowed in [[], ["127.0.0.1/32"], ["::2/128", "fe80::/10"]] {
            await #expect {
                _ = try await fetcher(allowed).fetch(url, cancel: CancellationFlag())
            } throws: { error in
                guard let e = error as? HalcyonError else { return false }
                return e.code == .blockedAddress && e.message == "refused to connect: ::1 is loopback (::1/128); allow it with --allow-network"
            }
        }
        for allowed in [["::1/128"], ["::1"], ["::/0"]] {
            let got = try await fetcher(allowed).fetch(url, cancel: CancellationFlag())
            #expect(got.data == png, "\(allowed)")
        }
    }

    @Test func cancellationAbortsADownload() async {
        let flag = CancellationFlag()
        let fetcher = self.fetcher
        let started = ContinuousClock.now
        // From a Dispatch thread: a cancel task could wait for a cooperative pool that other
        // suites' synchronous image tests keep busy.
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { flag.cancel() }
        await #expect {
            _ = try await fetcher.fetch("\(TestEnvironment.origin)/trickle/20/100000", cancel: flag)
        } throws: { error in
            // Stopped by the cancellation, not by the fetcher's 3 s timeout.
            (error as? HalcyonError)?.code == .cancelled
        }
        // The trickle would take 5000 s; a cancelled download stops within seconds (the bound is loose
        // because other suites keep the 2-core test machine busy).
        #expect(ContinuousClock.now - started < .seconds(120))
    }
}
