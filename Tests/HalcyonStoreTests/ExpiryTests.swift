import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

@testable import HalcyonStore

/// Keys, expiry attributes and hits (ARCHITECTURE.md §6).
@Suite struct ExpiryTests {
    static func makeStore() throws -> DiskStore {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return DiskStore(root: dir)
    }

    static let info = ResultInfo(format: "jpeg", width: 320, height: 200)

    func times(_ store: DiskStore, _ relative: String) throws -> FileTimes {
        try #require(FileTimes.read(store.url(forRelativePath: relative).path))
    }

    func near(_ a: Date, _ b: Date, _ tolerance: Double = 2) -> Bool { abs(a.timeIntervalSince(b)) <= tolerance }

    @Test func aStoredObjectCarriesItsExpiryAsMtimeAndTheWriteAsAtime() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let written = Date()
        let o = try await store.store(Data("abc".utf8), ext: "jpg", info: Self.info, key: "k@resize", expiration: .seconds(3600))
        let object = try times(store, o.path), key = try times(store, StoreLayout.keyPath(for: "k@resize"))
        #expect(near(object.expires, written + 3600))
        #expect(near(object.accessed, written))
        #expect(near(key.expires, written + 3600))
        #expect(near(key.accessed, written))
        let never = try await store.store(Data("n".utf8), ext: "png", info: Self.info, key: "n", expiration: .never)
        #expect(try times(store, never.path).expires == StorageExpiration.neverInstant)
    }

    /// `extend=none` keeps every expiry and the key's times, but a hit is still an access: the
    /// object's atime moves, or a size trim (least recently accessed first) would delete
    /// objects in active use.
    @Test func aHitWithCacheTimeMovesBothTimesAndNoneMovesOnlyTheObjectsAccess() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let t0 = Date(timeIntervalSinceNow: -7200)  // stored two hours ago with a 10 h TTL
        let o = try await store.store(Data("abc".utf8), ext: "jpg", info: Self.info, key: "k", expiration: .seconds(36_000), now: t0)
        let keyPath = StoreLayout.keyPath(for: "k")
        let before = (object: try times(store, o.path), key: try times(store, keyPath))

        let quietly = Date()
        let quiet = try #require(await store.lookup("k", extend: .none, now: quietly))
        #expect(quiet.object.path == o.path && quiet.info == Self.info && quiet.object.bytes == 3)
        let touched = try times(store, o.path)
        #expect(near(touched.accessed, quietly, 0.01) && touched.accessed > before.object.accessed)
        #expect(touched.expires == before.object.expires)
        #expect(try times(store, keyPath) == before.key)

        let now = Date()
        let hit = try #require(await store.lookup("k", extend: .cacheTime, now: now))
        #expect(near(hit.expires, now + 36_000, 0.01))
        let key = try times(store, keyPath), object = try times(store, o.path)
        #expect(near(key.accessed, now, 0.01) && near(key.expires, now + 36_000, 0.01))
        #expect(near(object.accessed, now, 0.01) && near(object.expires, now + 36_000, 0.01))

        _ = try #require(await store.lookup("k", extend: .expiration(.seconds(60)), now: now))
        #expect(near(try times(store, keyPath).expires, now + 60, 0.01))
        // The object keeps the later expiry its key needed before.
        #expect(near(try times(store, o.path).expires, now + 36_000, 0.01))
    }

    @Test func anExpiredKeyOrAMissingObjectIsAMiss() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let o = try await store.store(
            Data("abc".utf8), ext: "jpg", info: Self.info, key: "old", expiration: .seconds(60),
            now: Date(timeIntervalSinceNow: -120))
        #expect(await store.lookup("old", extend: .cacheTime) == nil)
        _ = try await store.store(Data("xyz".utf8), ext: "jpg", info: Self.info, key: "gone", expiration: .days(1))
        try FileManager.default.removeItem(
            at: store.url(forRelativePath: StoreLayout.objectPath(digest: Digest.sha256Hex(Data("xyz".utf8)), ext: "jpg")))
        #expect(await store.lookup("gone", extend: .cacheTime) == nil)
        #expect(await store.lookup("never-stored", extend: .cacheTime) == nil)
        // `expired` stores the result (the job needs it) but nothing hits it.
        let e = try await store.store(Data("e".utf8), ext: "png", info: Self.info, key: "e", expiration: .expired)
        #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: e.path).path))
        #expect(await store.lookup("e", extend: .cacheTime) == nil)
        _ = o
    }

    @Test func twoKeysOnOneObjectKeepItUntilTheLaterNeedsIt() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let now = Date()
        let bytes = Data("same bytes".utf8)
        let short = try await store.store(bytes, ext: "jpg", info: Self.info, key: "short", expiration: .seconds(60), now: now - 120)
        let long = try await store.store(bytes, ext: "jpg", info: Self.info, key: "long", expiration: .days(2), now: now - 100)
        #expect(short.path == long.path && long.existed)
        #expect(near(try times(store, long.path).expires, now - 100 + 2 * 86_400, 0.01))

        let report = Sweeper(store: store).sweep(now: now)
        #expect(report.removedKeys == 1 && report.expiredObjects == 0)
        #expect(await store.lookup("short", extend: .none) == nil)
        #expect(await store.lookup("long", extend: .none) != nil)
        // Once the long key's need passes too, both go.
        let later = Sweeper(store: store).sweep(now: now + 3 * 86_400)
        #expect(later.expiredObjects == 1 && later.removedKeys == 1)
        #expect(!FileManager.default.fileExists(atPath: store.url(forRelativePath: long.path).path))
    }

    @Test func sizeTrimRemovesTheLeastRecentlyAccessedUntilUnderHalf() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let now = Date()
        var paths: [String] = []
        for i in 0..<10 {  // 10 × 1000 bytes, object i last accessed i minutes after the first
            let o = try await store.store(
                Data(repeating: UInt8(i), count: 1000), ext: "png", info: Self.info, key: "k\(i)",
                expiration: .days(1), now: now - 3600 + Double(i) * 60)
            paths.append(o.path)
        }
        let report = Sweeper(store: store, sizeLimit: 8000).sweep(now: now)
        // Over 8000: delete the oldest until under 4000 → the six oldest go, four stay.
        #expect(report.trimmedObjects == 6 && report.trimmedBytes == 6000 && report.keptBytes == 4000)
        for (i, p) in paths.enumerated() {
            #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: p).path) == (i >= 6))
        }
        #expect(report.removedKeys == 6)
        #expect(Sweeper(store: store, sizeLimit: 8000).sweep(now: now).trimmedObjects == 0)
    }

    /// Over the limit, originals go first (they are fetched again when needed), then results
    /// least recently accessed first, to within one object of half the limit. The measure:
    /// 1.38 MB — 38 results of 10 kB and a 1 MB original used last — with a 200 KiB limit keeps
    /// the 10 results used last (100 kB; half the limit is 102,400 bytes).
    @Test func aTrimTakesOriginalsFirstAndKeepsWithinOneObjectOfHalfTheLimit() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let now = Date()
        var paths: [String] = []
        for i in 0..<38 {  // result i last accessed i seconds after the first, an hour ago
            paths.append(
                try await store.store(
                    Data(repeating: UInt8(i), count: 10_000), ext: "png", info: Self.info, key: "k\(i)", expiration: .days(1),
                    now: now - 3600 + Double(i)
                ).path)
        }
        let originals = OriginalsStore(storeRoot: store.root)
        try await originals.save(
            CachedOriginal(data: Data(repeating: 7, count: 1_000_000), etag: nil, lastModified: nil, expires: now + 86_400), for: "u")
        let report = Sweeper(store: store, sizeLimit: 200 << 10).sweep(now: now)
        #expect(report.keptBytes == 100_000 && report.trimmedObjects == 29, "kept \(report.keptBytes) bytes: \(report)")
        #expect(await originals.original(for: "u") == nil)
        for (i, p) in paths.enumerated() {
            #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: p).path) == (i >= 28), "k\(i)")
        }
        #expect(report.removedKeys == 28 && report.keptKeys == 10)
    }

    /// Jobs with `extend=none` hitting an old object: the trim must see it in use, or it deletes
    /// the one object everybody is asking for.
    @Test func aTrimKeepsAnObjectHitWithExtendNone() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let now = Date()
        var paths: [String] = []
        for i in 0..<4 {  // the first written first, an hour ago
            paths.append(
                try await store.store(
                    Data(repeating: UInt8(i), count: 1000), ext: "png", info: Self.info, key: "k\(i)",
                    expiration: .days(1), now: now - 3600 + Double(i) * 60
                ).path)
        }
        _ = try #require(await store.lookup("k0", extend: .none, now: now))
        let report = Sweeper(store: store, sizeLimit: 3000).sweep(now: now)
        #expect(report.trimmedObjects == 3)
        #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: paths[0]).path), "the object in use was trimmed")
    }

    /// An object a sweep removes while `verify` runs is not corrupt; it used to be reported so
    /// (and `verify` exited 1).
    @Test func verifyDoesNotCallObjectsRemovedMeanwhileCorrupt() throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        for i in 0..<20 { _ = try store.put(Data("object \(i)".utf8), ext: "png") }
        // Every other object is removed between being found and being read, as a sweep would.
        var n = 0
        let report = Verifier(store: store).verify(repair: false) { path in
            n += 1
            if n % 2 == 0 { unlink(path) }
        }
        #expect(report.corrupt.isEmpty, "reported corrupt: \(report.corrupt.prefix(3))")
        #expect(report.vanished == 10 && report.checkedObjects == 10)
    }

    /// New directories are made durable too: the object's directory, and each new directory's
    /// entry in its parent (a crash must not lose `objects/ab/cd` with the object in it).
    @Test func newDirectoriesAreSyncedIntoTheirParents() throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        var synced: [String] = []
        let final = store.url(forRelativePath: "objects/ab/cd/abcd.png")
        try AtomicFile.write(
            Data("x".utf8), to: final, tmpDirectory: store.url(forRelativePath: "tmp"), publish: .keepExisting,
            sync: { (d: URL) throws(HalcyonError) in synced.append(d.path) })
        let root = store.root.path
        #expect(synced == [root, root + "/objects", root + "/objects/ab", root + "/objects/ab/cd"])
        synced = []
        try AtomicFile.write(
            Data("y".utf8), to: store.url(forRelativePath: "objects/ab/cd/abce.png"), tmpDirectory: store.url(forRelativePath: "tmp"),
            publish: .keepExisting, sync: { (d: URL) throws(HalcyonError) in synced.append(d.path) })
        #expect(synced == [root + "/objects/ab/cd"], "only the object's own directory when nothing new was made")
    }

    @Test func fourWritersOfTheSameBytesMakeOneObjectAndEveryKeyHits() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let bytes = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let started = Date()
        let paths = try await withThrowingTaskGroup(of: String.self) { group in
            for w in 0..<4 {
                group.addTask {
                    try await store.store(bytes, ext: "jpg", info: Self.info, key: "writer-\(w)", expiration: .seconds(600 + Double(w) * 100)).path
                }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(paths.count == 1)
        let objects = try FileManager.default.subpathsOfDirectory(atPath: store.url(forRelativePath: "objects").path).filter { $0.hasSuffix(".jpg") }
        #expect(objects.count == 1)
        for w in 0..<4 { #expect(await store.lookup("writer-\(w)", extend: .none) != nil) }
        // The object lives as long as the longest-lived key needs.
        let expires = try times(store, paths.first!).expires
        #expect(expires >= started + 900 && expires <= Date() + 900)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.url(forRelativePath: "tmp").path).isEmpty)
    }

    @Test func aKeyThatCannotBeWrittenFailsWithWriteFailedAndLeavesNoKey() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        try Data().write(to: store.url(forRelativePath: "keys"))  // a file where the keys directory goes
        await #expect {
            _ = try await store.store(Data("abc".utf8), ext: "jpg", info: Self.info, key: "k", expiration: .days(1))
        } throws: { ($0 as? HalcyonError)?.code == .writeFailed }
        #expect(await store.lookup("k", extend: .none) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.url(forRelativePath: "tmp").path).isEmpty)
    }

    /// Sweeps of expired objects race writers that store the same bytes again (so they extend
    /// the very objects being swept): afterwards every key a writer wrote must hit.
    @Test func sweepingWhileWritersExtendTheSameObjectsLosesNoKey() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let payloads = (0..<300).map { Data("payload \($0)".utf8) }
        let past = Date(timeIntervalSinceNow: -3600)
        for (i, p) in payloads.enumerated() {
            _ = try await store.store(p, ext: "png", info: Self.info, key: "old-\(i)", expiration: .seconds(60), now: past)
        }
        let sweeps = Task.detached {
            var removed = 0
            for _ in 0..<20 { removed += Sweeper(store: store).sweep().expiredObjects }
            return removed
        }
        var written: [String] = []
        for (i, p) in payloads.enumerated() {
            _ = try await store.store(p, ext: "png", info: Self.info, key: "new-\(i)", expiration: .days(1))
            written.append("new-\(i)")
        }
        print("race: sweeps removed \(await sweeps.value) expired objects while writers extended them")
        _ = Sweeper(store: store).sweep()
        for key in written { #expect(await store.lookup(key, extend: .none) != nil, "\(key) lost its object") }
    }

    @Test func verifyFindsAndRepairsACorruptObject() async throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        let good = try await store.store(Data("good".utf8), ext: "png", info: Self.info, key: "g", expiration: .days(1))
        let bad = try await store.store(Data("bad".utf8), ext: "png", info: Self.info, key: "b", expiration: .days(1))
        try Data("bit rot".utf8).write(to: store.url(forRelativePath: bad.path))
        let report = Verifier(store: store).verify(repair: false)
        #expect(report.checkedObjects == 2 && report.corrupt == [bad.path])
        #expect(FileManager.default.fileExists(atPath: store.url(forRelativePath: bad.path).path))
        let repaired = Verifier(store: store).verify(repair: true)
        #expect(repaired.removedObjects == 1 && repaired.removedKeys == 1)
        #expect(await store.lookup("b", extend: .none) == nil)
        #expect(await store.lookup("g", extend: .none)?.object.path == good.path)
        #expect(Verifier(store: store).verify(repair: false).corrupt.isEmpty)
    }

    @Test func keyRecordsRoundTrip() throws {
        let record = KeyRecord(object: "objects/ab/cd/abcd.jpg", bytes: 12, info: Self.info, key: "a\nb\\c@resize(1x1,mode=fit)")
        #expect(KeyRecord(record.text) == record)
        #expect(KeyRecord("garbage") == nil)
        #expect(KeyRecord("halcyon-key 1\nobject ../../etc/passwd\nbytes 1\nimage jpeg 1x1\nkey k\n") == nil)
        // The encoder's quality and the score, when known; garbled ones are dropped, the record kept.
        let measured = KeyRecord(
            object: "objects/ab/cd/abcd.jpg", bytes: 12, info: ResultInfo(format: "jpeg", width: 1, height: 1, quality: 82, score: 87.31), key: "k")
        #expect(measured.text.hasSuffix("image jpeg 1x1\nquality 82\nscore 87.31\nkey k\n"), "\(measured.text)")
        #expect(KeyRecord(measured.text) == measured)
        let garbled = KeyRecord(
            "halcyon-key 1\nobject objects/ab/cd/abcd.jpg\nbytes 12\nimage jpeg 1x1\nquality -\nscore 1e400\nchroma 9:9:9\nkey k\n")
        #expect(garbled?.info.quality == nil && garbled?.info.score == nil && garbled?.info.chroma == nil && garbled?.key == "k")
        // The chroma sampling of a JPEG, when known.
        let sampled = KeyRecord(
            object: "objects/ab/cd/abcd.jpg", bytes: 12, info: ResultInfo(format: "jpeg", width: 1, height: 1, quality: 80, chroma: .half), key: "k")
        #expect(sampled.text.hasSuffix("quality 80\nchroma 4:2:0\nkey k\n") && KeyRecord(sampled.text) == sampled, "\(sampled.text)")
        // A half quality is written with its half; a half above 100, or any other fraction, is
        // dropped like any garbled quality.
        let half = KeyRecord(
            object: "objects/ab/cd/abcd.jpg", bytes: 12, info: ResultInfo(format: "jpeg", width: 1, height: 1, quality: 92, halfQuality: true),
            key: "k")
        #expect(half.text.hasSuffix("quality 92.5\nkey k\n") && KeyRecord(half.text) == half, "\(half.text)")
        #expect(KeyRecord(half.text)?.info.quality == 92 && KeyRecord(half.text)?.info.halfQuality == true)
        for bad in ["100.5", "92.25", "0.5", "92.", ".5"] {
            let read = KeyRecord(half.text.replacingOccurrences(of: "quality 92.5", with: "quality \(bad)"))
            #expect(read?.info.quality == nil && read?.info.halfQuality == false && read?.key == "k", "quality \(bad)")
        }
        #expect(ResultInfo(format: "jpeg", width: 1, height: 1, quality: 100, halfQuality: true).halfQuality == false)
    }

    @Test func staleTempFilesAreSwept() throws {
        let store = try Self.makeStore()
        defer { try? FileManager.default.removeItem(at: store.root) }
        try FileManager.default.createDirectory(at: store.url(forRelativePath: "tmp"), withIntermediateDirectories: true)
        try Data("half".utf8).write(to: store.url(forRelativePath: "tmp/x.part"))
        var sweeper = Sweeper(store: store)
        #expect(sweeper.sweep().removedTempFiles == 0)  // young: maybe a writer at work
        sweeper.tempFileAge = 0
        #expect(sweeper.sweep(now: Date() + 1).removedTempFiles == 1)
    }
}
