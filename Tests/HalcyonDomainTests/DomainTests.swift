import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

@Suite struct JobOptionsTests {
    @Test func defaults() throws {
        let o = try JobOptions.parse(json: "{}")
        #expect(o.expiration == .days(7))
        #expect(o.extend == .cacheTime)
        #expect(o.forceRefresh == false && o.onlyFromCache == false)
        #expect(o.retry == nil)
        #expect(o.score == false)
    }

    @Test func parsesEveryKey() throws {
        let o = try JobOptions.parse(
            json: """
                {"force_refresh": true, "only_from_cache": false, "expiration": "12h", "extend": "none",
                 "headers": {"X-A": "1"}, "retry": {"max": 3, "interval": "500ms", "backoff": "fixed"}, "score": true}
                """)
        #expect(o.forceRefresh)
        #expect(o.expiration == .seconds(43200))
        #expect(o.extend == ExpirationExtending.none)
        #expect(o.headers == ["X-A": "1"])
        #expect(o.retry == RetryOptions(max: 3, interval: 0.5, backoff: .fixed))
        #expect(o.score)
    }

    /// What a result records of its encoding is held to its bounds wherever it is read or written.
    @Test func resultMeasuresAreBounded() {
        #expect(ResultMeasures.quality(82) == 82 && ResultMeasures.quality(0) == nil && ResultMeasures.quality(101) == nil)
        #expect(ResultMeasures.score(87.314159) == 87.31 && ResultMeasures.score(-3) == 0 && ResultMeasures.score(250) == 100)
        #expect(ResultMeasures.score(.nan) == nil && ResultMeasures.score(.infinity) == nil && ResultMeasures.score(nil) == nil)
        #expect(ResultMeasures.quality(text: "82") == 82 && ResultMeasures.quality(text: "8x2") == nil)
        #expect(
            ResultMeasures.score(text: "87.31") == 87.31 && ResultMeasures.score(text: "NaN") == nil && ResultMeasures.score(text: "1e999") == nil)
    }

    @Test(arguments: [
        "[]", "\"x\"", "{\"force_refresh\": 1}", "{\"force_refresh\": \"yes\"}", "{\"expiration\": 7}",
        "{\"expiration\": \"soon\"}", "{\"extend\": \"forever\"}", "{\"headers\": [\"a\"]}",
        "{\"headers\": {\"a\": 1}}", "{\"retry\": {\"max\": 1.5}}", "{\"retry\": {\"max\": true}}",
        "{\"retry\": {\"backoff\": \"random\"}}", "{\"retry\": {\"interval\": \"2h\"}}", "{\"colour\": \"red\"}", "{\"score\": \"yes\"}",
        "{\"score\": 1}",
        "not json",
    ])
    func rejectsWrongTypes(json: String) {
        #expect {
            _ = try JobOptions.parse(json: json)
        } throws: { error in
            (error as? HalcyonError)?.code == .invalidOptions
        }
    }

    @Test func expirationForms() {
        #expect(StorageExpiration.parse("never") == .never)
        #expect(StorageExpiration.parse("expired") == .expired)
        #expect(StorageExpiration.parse("2030-01-02T03:04:05Z") == .date(Date(timeIntervalSince1970: 1893553445)))
        #expect(StorageExpiration.parse("7d") == .days(7))
        #expect(StorageExpiration.parse("90m") == .seconds(5400))
    }
}

/// Expiry math: what goes into a file's mtime and what a hit does to it.
@Suite struct ExpirationTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func expiryInstants() {
        #expect(StorageExpiration.seconds(30).expiry(from: now) == now + 30)
        #expect(StorageExpiration.days(7).expiry(from: now) == now + 7 * 86_400)
        #expect(StorageExpiration.never.expiry(from: now) == StorageExpiration.neverInstant)
        #expect(StorageExpiration.expired.expiry(from: now) == now)
        #expect(StorageExpiration.date(now - 5).expiry(from: now) == now - 5)  // a past instant: already expired
        #expect(StorageExpiration.days(1_000_000).expiry(from: now) == StorageExpiration.neverInstant)
    }

    @Test func cacheTimeRestartsTheItemsOwnTTL() throws {
        // Stored 2 h before `now` with a 10 h TTL: a hit gives it 10 h from now.
        let t = try #require(ExpirationExtending.cacheTime.extended(accessed: now - 7200, expires: now + 28_800, now: now))
        #expect(t.accessed == now)
        #expect(t.expires == now + 36_000)
    }

    @Test func noneLeavesTheTimesAndANewExpirationCountsFromNow() throws {
        #expect(ExpirationExtending.none.extended(accessed: now - 1, expires: now + 1, now: now) == nil)
        let t = try #require(ExpirationExtending.expiration(.seconds(60)).extended(accessed: now - 1000, expires: now + 5, now: now))
        #expect(t.accessed == now && t.expires == now + 60)
    }

    @Test func neverStaysNever() throws {
        let t = try #require(ExpirationExtending.cacheTime.extended(accessed: now - 10, expires: StorageExpiration.neverInstant, now: now))
        #expect(t.expires == StorageExpiration.neverInstant)
    }
}

@Suite struct ErrorCodeTests {
    @Test func contractCodesRender() {
        #expect(ErrorCode.invalidChain.description == "job.invalid_chain")
        #expect(ErrorCode.sourcesExhausted.description == "fetch.sources_exhausted")
        #expect(ErrorCode.internal.description == "internal")
        #expect(ErrorCode.leaseExpired.description == "worker.lease_expired")
    }

    @Test func permanence() {
        #expect(HalcyonError(.invalidChain, "x").permanent)
        #expect(HalcyonError(.notCached, "x").permanent)
        #expect(!HalcyonError(.writeFailed, "x").permanent)
        #expect(!HalcyonError(.timeout, "x").permanent)
        #expect(!HalcyonError(.internal, "x").permanent)
        #expect(!HalcyonError(.httpStatus, "x", permanent: false).permanent)
    }

    @Test func wrapKeepsHalcyonErrors() {
        struct Other: Error {}
        #expect(HalcyonError.wrap(HalcyonError(.timeout, "t")).code == .timeout)
        #expect(HalcyonError.wrap(Other()).code == .internal)
    }
}

@Suite struct ImageFormatTests {
    @Test func sniffsMagicBytes() {
        #expect(ImageFormat.sniff([0xFF, 0xD8, 0xFF, 0xE0]) == .jpeg)
        #expect(ImageFormat.sniff([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) == .png)
        #expect(ImageFormat.sniff(Array("GIF89a....".utf8)) == .gif)
        #expect(ImageFormat.sniff(Array("RIFF\0\0\0\0WEBPVP8 ".utf8)) == .webp)
        #expect(ImageFormat.sniff([0, 0, 0, 0x1C] + Array("ftypavif".utf8)) == .avif)
    }

    @Test func refusesEverythingElse() {
        #expect(ImageFormat.sniff([UInt8]()) == nil)
        #expect(ImageFormat.sniff(Array("<svg xmlns=".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("%!PS-Adobe".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("push graphic-context".utf8)) == nil)
    }
}

@Suite struct UnsupportedFormatTests {
    @Test func rasterFormatsItDoesNotDecodeAreNamed() {
        #expect(ImageFormat.unsupportedName(Array("8BPS\u{0}\u{1}".utf8)) == "PSD (Photoshop)")
        #expect(ImageFormat.unsupportedName([0x01, 0xDA, 0x00, 0x01]) == "SGI")
        #expect(ImageFormat.unsupportedName([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A]) == "JPEG 2000")
        #expect(ImageFormat.unsupportedName([0xFF, 0x0A, 0xFA]) == "JPEG XL")
        #expect(ImageFormat.unsupportedName(Array("qoif".utf8)) == "QOI")
        #expect(ImageFormat.unsupportedName(Array("P6\n4 4\n255\n".utf8)) == "Netpbm (P6)")
        let tga = [UInt8](repeating: 0, count: 30) + Array("TRUEVISION-XFILE.".utf8) + [0]
        #expect(ImageFormat.unsupportedName(tga, last: tga.suffix(18)) == "TGA")
    }

    @Test func documentsAndOtherBytesAreNotImages() {
        for bytes in ["%PDF-1.7", "%!PS-Adobe-3.0", "<svg xmlns=", "<html>", "PK\u{3}\u{4}", "P9 nothing", ""].map({ Array($0.utf8) }) {
            #expect(ImageFormat.unsupportedName(bytes) == nil, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }
}

@Suite struct SettingTests {
    /// A setting's help says its meaning, its accepted values and its detail; its check names
    /// the option and what it accepts, and lets an "off" value through.
    @Test func helpAndCheckComeFromOneDescription() throws {
        let lease = Setting.duration("--lease", default: .seconds(30), .seconds(1)...(.days(1)), "Lease per claimed job", detail: "Renewed.")
        #expect(lease.help == "Lease per claimed job, 1s–1d. Renewed.")
        #expect(throws: Never.self) { try lease.check(Duration.seconds(30)) }
        do {
            try lease.check(Duration.milliseconds(500))
            Issue.record("500ms accepted")
        } catch {
            #expect(error.code == .invalidOptions && error.message == "--lease must be from 1s to 1d; got 500ms")
        }
        let sweep = Setting.duration("--sweep-interval", default: .seconds(600), .seconds(1)...(.days(30)), off: .zero, "How often")
        #expect(sweep.help == "How often; 0s turns it off, else 1s–30d.")
        #expect(throws: Never.self) { try sweep.check(Duration.zero) }
        let size = Setting.bytes("--mmap-threshold", default: 4 << 20, 4096...(32 << 20), off: 0, "Threshold")
        #expect(size.help == "Threshold; 0 turns it off, else 4KiB–32MiB.")
        #expect(throws: HalcyonError.self) { try size.check(64 << 20) }
        let none: Int? = nil
        #expect(throws: Never.self) { try size.check(none) }
    }
}
