import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3
import HalcyonStore
import HalcyonTestSupport
import Testing

/// The S3 store against a real S3 server (SeaweedFS, started by `scripts/test`): the disk
/// store's guarantees, each checked on the bucket.
@Suite(.enabled(if: TestEnvironment.s3Available, "needs scripts/test (SeaweedFS)"))
struct ObjectStoreTests {
    static func store(prefix: String = "store-\(UUID().uuidString.prefix(8))") throws -> ObjectStore {
        guard
            case .objectStore(let configuration) = try StoreLocation(
                parsing: TestEnvironment.s3StoreURL(prefix: prefix), environment: TestEnvironment.s3Environment)
        else { throw HalcyonError(.internal, "not an object store") }
        return ObjectStore(client: try S3Client(configuration: configuration))
    }

    static let info = ResultInfo(format: "png", width: 4, height: 3)

    static func bytes(_ seed: Int, count: Int = 2000) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ seed) })
    }

    @Test func aStoredResultIsAHitByKeyWithItsFacts() async throws {
        let store = try Self.store()
        let now = Date()
        let data = Self.bytes(1)
        let info = ResultInfo(
            format: "png", width: 4, height: 3,
            source: SourceRecord(width: 40, height: 30, format: "jpeg", bytes: 1234, metaJSON: #"{"frames":1}"#),
            placeholdersJSON: #"{"blurhash":"LEHV6n"}"#, quality: 82, score: 87.31)
        let object = try await store.store(data, ext: "png", info: info, key: "https://a.example/x.jpg@resize(4x3)", expiration: .days(7), now: now)
        #expect(!object.existed && object.path == StoreLayout.objectPath(digest: Digest.sha256Hex(data), ext: "png"))
        let before = store.client.requestsSent
        let hit = try #require(await store.lookup("https://a.example/x.jpg@resize(4x3)", extend: .none, now: now))
        #expect(store.client.requestsSent - before == 1, "a hit is one request")
        #expect(hit.object.digest == object.digest && hit.object.path == object.path && hit.object.bytes == data.count)
        #expect(hit.info == info && hit.info.quality == 82 && hit.info.score == 87.31)
        #expect(abs(hit.expires.timeIntervalSince(now.addingTimeInterval(7 * 86_400))) < 2)
        #expect(await store.lookup("https://a.example/other.jpg@resize(4x3)", extend: .none, now: now) == nil)
        // The object by its digest, as the dashboard reads it.
        let file = try #require(await store.object(digest: object.digest, maxBytes: 1 << 20))
        #expect(file.data == data && file.format == .png)
        #expect(await store.object(digest: object.digest, maxBytes: 100) == nil, "over the bound")
        #expect(await store.objectInfo(digest: object.digest)?.bytes == data.count)
        #expect(await store.objectInfo(digest: String(repeating: "0", count: 64)) == nil)
    }

    /// The key record in the bucket is the disk store's: without `quality` and `score` lines (a
    /// record written before they existed) a hit has none, and garbled ones are left out.
    @Test func aKeyRecordWithoutOrWithGarbledMeasuresIsStillAHit() async throws {
        let store = try Self.store()
        let now = Date()
        let info = ResultInfo(format: "jpeg", width: 4, height: 3, quality: 61, score: 70.5)
        _ = try await store.store(Self.bytes(7), ext: "jpg", info: info, key: "k@measured", expiration: .days(7), now: now)
        let keyPath = StoreLayout.keyPath(for: "k@measured")
        let found = try #require(try await store.client.get(keyPath, maxBytes: 65_536))
        let text = String(decoding: found.data, as: UTF8.self)
        #expect(text.contains("\nquality 61\nscore 70.5\n"), "\(text)")
        for (replacement, quality, score) in [("", nil, nil), ("quality high\nscore NaN\n", nil, nil), ("quality 61\nscore 1e999\n", 61, nil)]
            as [(String, Int?, Double?)]
        {
            let record = text.replacingOccurrences(of: "quality 61\nscore 70.5\n", with: replacement)
            _ = try await store.client.put(
                keyPath, data: Data(record.utf8), contentType: "text/plain; charset=utf-8", metadata: found.info.metadata, ifNoneMatch: false)
            let hit = try #require(await store.lookup("k@measured", extend: .none, now: now), "\(record)")
            #expect(hit.info.quality == quality && hit.info.score == score && hit.info.format == "jpeg", "\(record)")
        }
    }

    /// Write-once: sixteen workers storing the same bytes at once write them once; the rest
    /// find them (412) and raise the expiry — never an overwrite.
    @Test func concurrentWritersOfTheSameBytesWriteThemOnce() async throws {
        let store = try Self.store()
        let data = Self.bytes(2, count: 300_000)
        let all = await withTaskGroup(of: StoredObject?.self) { group in
            for i in 0..<16 { group.addTask { try? await store.store(data, ext: "jpg", info: Self.info, key: "k\(i)", expiration: .days(1)) } }
            return await group.reduce(into: [StoredObject]()) { if let object = $1 { $0.append(object) } }
        }
        #expect(all.count == 16)
        #expect(all.filter { !$0.existed }.count == 1, "\(all.map(\.existed))")
        for i in 0..<16 { #expect(await store.lookup("k\(i)", extend: .none)?.object.digest == Digest.sha256Hex(data)) }
    }

    /// A claim's lookups go side by side: every hit found, under its own key, each key once.
    @Test func aBatchOfLookupsFindsEachHitUnderItsKey() async throws {
        let store = try Self.store()
        var digests: [String: String] = [:]
        for i in 0..<40 {
            digests["k\(i)"] = try await store.store(Self.bytes(200 + i), ext: "png", info: Self.info, key: "k\(i)", expiration: .days(1)).digest
        }
        let keys = (0..<45).map { (key: "k\($0)", extend: ExpirationExtending.none) } + [(key: "k3", extend: .none)]
        let found = await store.lookup(keys, now: Date())
        #expect(found.count == 40)
        for (key, digest) in digests { #expect(found[key]?.object.digest == digest, "\(key)") }
    }

    @Test func expiredKeysMissAndExpiredStoresAreMisses() async throws {
        let store = try Self.store()
        let now = Date()
        _ = try await store.store(Self.bytes(3), ext: "png", info: Self.info, key: "short", expiration: .seconds(60), now: now)
        #expect(await store.lookup("short", extend: .none, now: now.addingTimeInterval(30)) != nil)
        #expect(await store.lookup("short", extend: .none, now: now.addingTimeInterval(61)) == nil)
        _ = try await store.store(Self.bytes(4), ext: "png", info: Self.info, key: "uncached", expiration: .expired, now: now)
        #expect(await store.lookup("uncached", extend: .none, now: now) == nil)
    }

    /// Extension on use rewrites metadata (the object's and the key's), never bytes, and only
    /// when it moves the expiry by more than a tenth of the time left: a second hit a second
    /// later changes nothing.
    @Test func hitsExtendTheExpiryWithoutRewritingOnEveryHit() async throws {
        let store = try Self.store()
        let start = Date()
        let data = Self.bytes(5)
        let object = try await store.store(data, ext: "png", info: Self.info, key: "hot", expiration: .seconds(3600), now: start)
        let keyPath = StoreLayout.keyPath(for: "hot")
        let hit = try #require(await store.lookup("hot", extend: .cacheTime, now: start.addingTimeInterval(1800)))
        #expect(abs(hit.expires.timeIntervalSince(start.addingTimeInterval(5400))) < 2, "the TTL restarted from the hit")
        let key = try #require(try await store.keyTimes("hot"))
        #expect(abs(key.expires.timeIntervalSince(start.addingTimeInterval(5400))) < 2)
        let objectInfo = try #require(try await store.client.head(object.path))
        #expect((Double(objectInfo.metadata["halcyon-expires"] ?? "") ?? 0) >= start.addingTimeInterval(5399).timeIntervalSince1970)
        #expect(try await store.client.get(object.path, maxBytes: 1 << 20)?.data == data, "the bytes are as written")
        // A second hit just after: worth nothing, so no copy (the key's metadata is unchanged),
        // and one request, as any hit that does not extend.
        let afterFirst = try #require(try await store.client.head(keyPath))
        let before = store.client.requestsSent
        _ = await store.lookup("hot", extend: .cacheTime, now: start.addingTimeInterval(1801))
        #expect(store.client.requestsSent - before == 1)
        let afterSecond = try #require(try await store.client.head(keyPath))
        #expect(afterSecond.metadata == afterFirst.metadata)
        // `none` never writes.
        _ = await store.lookup("hot", extend: .none, now: start.addingTimeInterval(5000))
        #expect(try await store.client.head(keyPath)?.metadata == afterFirst.metadata)
    }

    /// A sweep removes what expired (objects after the grace), keys that expired or dangle, and
    /// trims by last write to half the size limit; what is alive and used stays.
    @Test func sweepsRemoveExpiredEntriesDanglingKeysAndTrimToTheLimit() async throws {
        let store = try Self.store()
        let now = Date()
        let old = now.addingTimeInterval(-3 * 86_400)
        // Expired two days ago (past the hour's grace).
        _ = try await store.store(Self.bytes(10), ext: "png", info: Self.info, key: "old", expiration: .days(1), now: old)
        // Alive.
        let alive = try await store.store(Self.bytes(11), ext: "png", info: Self.info, key: "alive", expiration: .days(7), now: now)
        // A key whose object is gone.
        let dangling = try await store.store(Self.bytes(12), ext: "png", info: Self.info, key: "dangling", expiration: .days(7), now: now)
        try await store.client.delete(dangling.path)
        let report = await store.sweep(sizeLimit: nil, now: now, cancel: nil)
        #expect(report.expiredObjects == 1 && report.removedKeys == 2, "\(report)")
        #expect(report.keptFiles == 1 && report.keptKeys == 1 && report.keptBytes == Int64(alive.bytes), "\(report)")
        #expect(await store.lookup("alive", extend: .none, now: now) != nil)
        #expect(try await store.client.head(StoreLayout.keyPath(for: "old")) == nil)

        // Ten more objects of 10 kB; a limit of 50 kB trims to 25 kB: within one object of it.
        for i in 0..<10 {
            _ = try await store.store(Self.bytes(100 + i, count: 10_000), ext: "png", info: Self.info, key: "n\(i)", expiration: .days(7), now: now)
        }
        let trimmed = await store.sweep(sizeLimit: 50_000, now: now, cancel: nil)
        #expect(trimmed.trimmedObjects > 0 && trimmed.keptBytes <= 25_000 && trimmed.keptBytes > 15_000, "\(trimmed)")
        #expect(trimmed.sizeLimit == 50_000 && trimmed.failure == nil)
        // Every key left names an object that is there: the trim removed the keys first.
        #expect(trimmed.removedKeys == trimmed.trimmedObjects, "\(trimmed)")
        for key in ["alive"] + (0..<10).map({ "n\($0)" }) {
            if let hit = await store.lookup(key, extend: .none, now: now) { #expect(try await store.client.head(hit.object.path) != nil, "\(key)") }
        }
    }

    /// Over the limit, a sweep deletes originals first (they are fetched again when needed),
    /// then results least recently written or extended first, until what is left is at most
    /// half the limit, within one object of it; the keys naming a trimmed result go with it.
    @Test func aTrimTakesOriginalsFirstThenTheLeastRecentlyUsedResults() async throws {
        let store = try Self.store()
        var paths: [String] = []
        for i in 0..<4 {  // S3's LastModified counts whole seconds: one result per second
            if i > 0 { try await Task.sleep(for: .milliseconds(1100)) }
            paths.append(
                try await store.store(Self.bytes(60 + i, count: 10_000), ext: "png", info: Self.info, key: "r\(i)", expiration: .seconds(3600)).path)
        }
        try await Task.sleep(for: .milliseconds(1100))
        // r0 is used: a hit that extends it moves its LastModified (and its key's) to now.
        #expect(await store.lookup("r0", extend: .cacheTime, now: Date().addingTimeInterval(1800)) != nil)
        // The original is the newest entry: taken first all the same.
        try await store.originals.save(
            CachedOriginal(data: Self.bytes(50, count: 30_000), etag: nil, lastModified: nil, expires: Date() + 86_400), for: "https://o.example/a")
        // A listing's date and a HEAD's agree to the second (the trim relies on it).
        let listed = try #require(try await store.client.list(prefix: "objects/").entries.first { $0.key == paths[1] })
        let headed = try #require(try await store.client.head(paths[1]))
        #expect(listed.lastModified.map { Int64($0.timeIntervalSince1970) } == headed.lastModified.map { Int64($0.timeIntervalSince1970) })

        // 70 kB (and the original's header) over a 60 kB limit: down to 30 kB — the original
        // (30 kB), then r1 (10 kB), the result least recently written or extended.
        let report = await store.sweep(sizeLimit: 60_000, now: Date(), cancel: nil)
        #expect(report.trimmedObjects == 2 && report.keptBytes == 30_000, "\(report)")
        #expect(report.removedKeys == 1 && report.keptKeys == 3 && report.failure == nil, "\(report)")
        #expect(await store.originals.original(for: "https://o.example/a") == nil)
        for (i, path) in paths.enumerated() {
            #expect((try await store.client.head(path) != nil) == (i != 1), "r\(i)")
            #expect((await store.lookup("r\(i)", extend: .none) != nil) == (i != 1), "r\(i)")
        }
    }

    /// The trim's measure: 1.38 MB — a 1 MB original, used last, and 38 results of 10 kB — swept
    /// with a 200 KiB limit keeps 100 kB of results (half the limit is 102,400 bytes).
    @Test func aTrimOf138MBTo200KiBKeepsWithinOneObjectOfHalfTheLimit() async throws {
        let store = try Self.store()
        for i in 0..<38 {
            _ = try await store.store(Self.bytes(300 + i, count: 10_000), ext: "png", info: Self.info, key: "m\(i)", expiration: .days(1))
        }
        try await Task.sleep(for: .milliseconds(1100))
        try await store.originals.save(
            CachedOriginal(data: Self.bytes(7, count: 1_000_000), etag: nil, lastModified: nil, expires: Date() + 86_400),
            for: "https://o.example/big")
        let report = await store.sweep(sizeLimit: 200 << 10, now: Date(), cancel: nil)
        #expect(report.keptBytes <= 102_400 && report.keptBytes > 102_400 - 10_000, "kept \(report.keptBytes) bytes: \(report)")
        #expect(report.keptBytes == 100_000 && report.keptKeys == 10 && report.removedKeys == 28, "\(report)")
    }

    /// `--repair` removes a corrupt object and every key naming it, at once: a hit must never
    /// name an object the bucket does not hold (a lookup reads only the key, so a key left
    /// behind would be a hit whose `result_path` answers 404 until the next sweep).
    @Test func verifyRepairRemovesACorruptObjectAndTheKeysNamingIt() async throws {
        let store = try Self.store()
        let good = try await store.store(Self.bytes(20), ext: "png", info: Self.info, key: "good", expiration: .days(1))
        let bad = try await store.store(Self.bytes(21), ext: "png", info: Self.info, key: "bad", expiration: .days(1))
        _ = try await store.store(Self.bytes(21), ext: "png", info: Self.info, key: "bad too", expiration: .days(1))
        // Damaged in the bucket: other bytes under its name.
        _ = try await store.client.put(bad.path, data: Data("not the bytes".utf8), ifNoneMatch: false)
        let report = await store.verify(repair: false)
        #expect(report.checkedObjects == 2 && report.corrupt == [bad.path], "\(report)")
        #expect(await store.lookup("bad", extend: .none) != nil, "without --repair nothing is removed")
        let repaired = await store.verify(repair: true)
        #expect(repaired.removedObjects == 1 && repaired.removedKeys == 2 && repaired.failure == nil, "\(repaired)")
        #expect(try await store.client.head(bad.path) == nil)
        #expect(try await store.client.head(good.path) != nil)
        // At once, not at the next sweep: the next job for these keys processes afresh.
        #expect(await store.lookup("bad", extend: .none) == nil)
        #expect(await store.lookup("bad too", extend: .none) == nil)
        #expect(await store.lookup("good", extend: .none)?.object.path == good.path)
        #expect(await store.sweep(sizeLimit: nil, now: Date(), cancel: nil).removedKeys == 0, "nothing left dangling")
        #expect(await store.verify(repair: false).corrupt.isEmpty)
    }

    /// A key never outlives its object, or a sweep that deletes the expired object leaves a hit
    /// naming nothing. Two keys share an object whose expiry is the later key's; a hit extends
    /// the earlier key just past it, by less than the tenth of the time left that makes an
    /// extension worth a copy on its own: the object is raised too.
    @Test func anExtendedKeyNeverOutlivesItsObject() async throws {
        let store = try Self.store()
        let t0 = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let data = Self.bytes(70)
        let object = try await store.store(data, ext: "png", info: Self.info, key: "short", expiration: .seconds(3600), now: t0)
        _ = try await store.store(data, ext: "png", info: Self.info, key: "long", expiration: .seconds(3700), now: t0)
        // At t0 + 400 the short key's TTL restarts: t0 + 4000, 300 s past the object's t0 + 3700.
        let hit = try #require(await store.lookup("short", extend: .cacheTime, now: t0 + 400))
        #expect(Int64(hit.expires.timeIntervalSince1970) == Int64((t0 + 4000).timeIntervalSince1970))
        let objectExpires = try #require(try await store.client.head(object.path)?.metadata["halcyon-expires"].flatMap { Int64($0) })
        #expect(objectExpires >= Int64((t0 + 4000).timeIntervalSince1970), "the key outlives its object")
    }

    /// A write that finds its bytes already there (412) costs what it must: the HEAD that reads
    /// the object's expiry, and a metadata copy only when its own expiry is later by a whole
    /// second (metadata holds whole seconds: an instant a fraction of a second later is not
    /// later). A hit that extends copies the object and the key once each, with no HEAD of the
    /// key (its GET read it).
    @Test func aWriteOfBytesAlreadyThereCostsAHeadAndCopiesOnlyToMoveTheExpiry() async throws {
        let store = try Self.store()
        let data = Self.bytes(40)
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down) + 0.25)
        let first = try await store.store(data, ext: "png", info: Self.info, key: "a", expiration: .days(1), now: now)
        let written = try #require(try await store.client.head(first.path))

        func requests(_ body: () async throws -> Void) async rethrows -> Int {
            let before = store.client.requestsSent
            try await body()
            return store.client.requestsSent - before
        }
        // The same expiry, and one a fraction of a second later: PUT (412), HEAD, the key's PUT.
        #expect(try await requests { _ = try await store.store(data, ext: "png", info: Self.info, key: "b", expiration: .days(1), now: now) } == 3)
        #expect(
            try await requests { _ = try await store.store(data, ext: "png", info: Self.info, key: "c", expiration: .days(1), now: now + 0.5) } == 3)
        let unchanged = try #require(try await store.client.head(first.path))
        #expect(unchanged.etag == written.etag && unchanged.metadata == written.metadata, "no copy changed the object")
        // A day later: PUT (412), HEAD, one copy, the key's PUT.
        #expect(try await requests { _ = try await store.store(data, ext: "png", info: Self.info, key: "d", expiration: .days(2), now: now) } == 4)
        let raised = try #require(try await store.client.head(first.path))
        #expect(raised.metadata["halcyon-expires"] == String(Int64((now + 2 * 86_400).timeIntervalSince1970.rounded(.down))))
        for key in ["a", "b", "c", "d"] { #expect(await store.lookup(key, extend: .none, now: now)?.object.path == first.path) }
        // A hit worth extending: the key's GET, the object's HEAD and copy, the key's copy.
        #expect(await requests { _ = await store.lookup("a", extend: .expiration(.days(30)), now: now) } == 4)
        #expect(try await store.keyTimes("a").map { Int64($0.expires.timeIntervalSince1970) } == Int64((now + 30 * 86_400).timeIntervalSince1970))
        // An original's refresh: a HEAD and a copy.
        try await store.originals.save(CachedOriginal(data: data, etag: nil, lastModified: nil, expires: now + 60), for: "https://o.example/x")
        #expect(await requests { await store.originals.refresh("https://o.example/x", until: now + 3600) } == 2)
        #expect(abs((await store.originals.original(for: "https://o.example/x")?.expires ?? .distantPast).timeIntervalSince(now + 3600)) < 1)
    }

    @Test func originalsAreKeptInTheBucketWithTheirValidators() async throws {
        let store = try Self.store()
        let originals = store.originals
        let url = "https://origin.example/a.jpg?x=1"
        let expires = Date().addingTimeInterval(600)
        try await originals.save(
            CachedOriginal(data: Self.bytes(30), etag: "\"e1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", expires: expires), for: url)
        let kept = try #require(await originals.original(for: url))
        #expect(kept.data == Self.bytes(30) && kept.etag == "\"e1\"" && kept.lastModified == "Wed, 21 Oct 2015 07:28:00 GMT")
        #expect(abs(kept.expires.timeIntervalSince(expires)) < 2)
        #expect(await originals.original(for: "https://origin.example/other.jpg") == nil)
        let later = Date().addingTimeInterval(7200)
        await originals.refresh(url, until: later)
        #expect(abs((await originals.original(for: url)?.expires ?? .distantPast).timeIntervalSince(later)) < 2)
    }

    @Test func storeLocationsAreADirectoryOrS3AndNothingElse() throws {
        #expect(try StoreLocation(parsing: "/var/halcyon").directory?.path == "/var/halcyon")
        guard case .objectStore(let c) = try StoreLocation(parsing: "s3://my-bucket/results", environment: [:]) else {
            Issue.record("s3:// is an object store")
            return
        }
        #expect(c.bucket == "my-bucket" && c.prefix == "results/")
        #expect(throws: HalcyonError.self) { try StoreLocation(parsing: "gs://bucket/x", environment: [:]) }
        #expect(throws: HalcyonError.self) { try StoreLocation(parsing: "s3://A_bad_bucket", environment: [:]) }
    }
}
