import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonStore
import Testing

@Suite struct DiskStoreTests {
    func makeRoot() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A key keeps the source's facts (never a GPS position) and the placeholders for hits,
    /// relayed as written; a mangled facts line costs the hit its facts, not the hit.
    @Test func keysKeepFactsAndPlaceholdersForHits() async throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        var facts = SourceFacts(width: 4032, height: 3024, format: .jpeg, bytes: 482_113)
        facts.cameraModel = "HX 1"
        facts.hasGPS = true
        facts.position = SourceFacts.GPSPosition(latitude: 48.8, longitude: 2.3)
        let placeholders = Placeholders(blurhash: "LEHV6nWB2yk8pyo0adR*.7kCMdnj", dominantColor: "#102030")
        let info = ResultInfo(format: "webp", width: 320, height: 240, facts: facts, placeholders: placeholders)
        _ = try await store.store(Data([9, 9, 9]), ext: "webp", info: info, key: "k@resize", expiration: .days(1))
        let hit = try #require(await store.lookup("k@resize", extend: .none))
        let source = try #require(hit.info.source)
        #expect((source.width, source.height, source.format, source.bytes) == (4032, 3024, "jpeg", 482_113))
        let meta = try #require(JSONValue.parse(source.metaJSON))
        #expect(meta["camera_model"] == "HX 1" && meta["has_gps"] == .bool(true) && meta["gps"] == nil)
        #expect(hit.info.placeholdersJSON.flatMap(Placeholders.init(jsonText:)) == placeholders)

        let keyFile = root.appendingPathComponent(StoreLayout.keyPath(for: "k@resize"))
        let text = try String(contentsOf: keyFile, encoding: .utf8)
        try text.replacingOccurrences(of: "source jpeg 4032x3024", with: "source jpeg 4032by3024").write(
            to: keyFile, atomically: false, encoding: .utf8)
        FileTimes(accessed: Date(), expires: Date().addingTimeInterval(3600)).write(to: keyFile.path)
        let mangled = try #require(await store.lookup("k@resize", extend: .none))
        #expect(mangled.info.source == nil && mangled.info.placeholdersJSON != nil)
    }

    /// A picture set's key records its rungs (`manifest {…}`); a hit relays them; a manifest line
    /// that does not read as one (hand-edited, truncated) is left out of the hit, not fatal.
    @Test func keysKeepAPictureSetsManifest() async throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        let path = "objects/ab/ab/" + String(repeating: "ab", count: 32) + ".avif"
        let manifest = PictureManifest(rungs: [PictureRung(width: 320, height: 213, format: .avif, bytes: 9000, score: 80.5, quality: 61, path: path)]
        )
        var info = ResultInfo(format: "jpeg", width: 1600, height: 1067, facts: nil, placeholders: nil)
        info.manifestJSON = manifest.storedJSON
        _ = try await store.store(Data([7, 7, 7]), ext: "jpg", info: info, key: "k@breakpoints", expiration: .days(1))
        let hit = try #require(await store.lookup("k@breakpoints", extend: .none))
        #expect(hit.info.manifestJSON.flatMap(PictureManifest.init(jsonText:)) == manifest)
        let keyFile = root.appendingPathComponent(StoreLayout.keyPath(for: "k@breakpoints"))
        let text = try String(contentsOf: keyFile, encoding: .utf8)
        #expect(text.contains("\nmanifest {\"rungs\":[{"), "\(text)")
        try text.replacingOccurrences(of: path, with: "../../etc/passwd").write(to: keyFile, atomically: false, encoding: .utf8)
        FileTimes(accessed: Date(), expires: Date().addingTimeInterval(3600)).write(to: keyFile.path)
        let mangled = try #require(await store.lookup("k@breakpoints", extend: .none))
        #expect(mangled.info.manifestJSON == nil && mangled.info.width == 1600)
    }

    /// A key keeps the quality and score its result was stored with (`quality 82`, `score 87.31`,
    /// the score rounded to two decimals); a record without them (written before they existed)
    /// is a hit without them, and a value that does not read as one is left out, not fatal.
    @Test func keysKeepQualityAndScoreAndShrugOffGarbage() async throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        let info = ResultInfo(format: "jpeg", width: 320, height: 240, facts: nil, placeholders: nil, quality: 82, score: 87.314159)
        #expect(info.score == 87.31)
        _ = try await store.store(Data([1, 2, 3]), ext: "jpg", info: info, key: "k@q", expiration: .days(1))
        let keyFile = root.appendingPathComponent(StoreLayout.keyPath(for: "k@q"))
        let text = try String(contentsOf: keyFile, encoding: .utf8)
        #expect(text.contains("\nimage jpeg 320x240\nquality 82\nscore 87.31\nkey k@q\n"), "\(text)")
        let hit = try #require(await store.lookup("k@q", extend: .none))
        #expect(hit.info == info && hit.info.quality == 82 && hit.info.score == 87.31)

        func rewritten(_ quality: String?, _ score: String?) async throws -> ResultInfo? {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("quality ") && !$0.hasPrefix("score ") }
            lines.insert(contentsOf: [quality.map { "quality " + $0 }, score.map { "score " + $0 }].compactMap { $0 }.map { Substring($0) }, at: 1)
            try lines.joined(separator: "\n").write(to: keyFile, atomically: false, encoding: .utf8)
            FileTimes(accessed: Date(), expires: Date().addingTimeInterval(3600)).write(to: keyFile.path)
            return await store.lookup("k@q", extend: .none)?.info
        }
        // Before the lines existed: a hit without them.
        let old = try #require(try await rewritten(nil, nil))
        #expect(old.quality == nil && old.score == nil && old.width == 320)
        // Garbled, out of range, not a number: each left out, the hit kept; in range again: read.
        for (q, s) in [("8x2", "NaN"), ("0", "inf"), ("101", "1e999"), ("", "--"), ("82.25", "87,31"), ("-5", "nan(0x1)")] {
            let garbled = try #require(try await rewritten(q, s), "\(q) \(s)")
            #expect(garbled.quality == nil && garbled.score == nil && garbled.format == "jpeg", "\(q) \(s)")
        }
        // A half quality (a JPEG search's last step).
        let half = try #require(try await rewritten("82.5", "87.31"))
        #expect(half.quality == 82 && half.halfQuality && half.score == 87.31)
        let clamped = try #require(try await rewritten("100", "100.004"))
        #expect(clamped.quality == 100 && clamped.score == 100)
        let negative = try #require(try await rewritten("1", "-0.2"))
        #expect(negative.quality == 1 && negative.score == 0)
        // Unknown measures are not written at all.
        let plain = ResultInfo(format: "png", width: 1, height: 1, quality: nil, score: .nan)
        _ = try await store.store(Data([4, 5, 6]), ext: "png", info: plain, key: "k@png", expiration: .days(1))
        let plainText = try String(contentsOf: root.appendingPathComponent(StoreLayout.keyPath(for: "k@png")), encoding: .utf8)
        #expect(!plainText.contains("quality") && !plainText.contains("score"), "\(plainText)")
    }

    /// A scoped key is its own entry: found under its scope only, never under the bare key or
    /// another scope, and it survives the key file's escaping (NUL, newline, backslash).
    @Test func aScopedKeyIsFoundOnlyInItsScope() async throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        let key = "avatar\\1\n@format(png)"
        let scoped = StoreLayout.storeKey(key, scope: "tenant_a")
        #expect(StoreLayout.storeKey(key, scope: nil) == key)
        #expect(scoped != key && StoreLayout.keyPath(for: scoped) != StoreLayout.keyPath(for: key))
        let info = ResultInfo(format: "png", width: 1, height: 1)
        _ = try await store.store(Data([1, 2, 3]), ext: "png", info: info, key: scoped, expiration: .days(1))
        #expect(await store.lookup(scoped, extend: .none) != nil)
        #expect(await store.lookup(key, extend: .none) == nil)
        #expect(await store.lookup(StoreLayout.storeKey(key, scope: "tenant_b"), extend: .none) == nil)
        #expect(await store.lookup("tenant_a" + key, extend: .none) == nil)
    }

    @Test func sha256MatchesKnownVectors() {
        #expect(Digest.sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Digest.sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func objectsAreNamedByTheirDigest() throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        let data = Data("hello image".utf8)
        let o = try store.put(data, ext: "jpg")
        let digest = Digest.sha256Hex(data)
        #expect(o.digest == digest)
        #expect(o.path == "objects/\(digest.prefix(2))/\(digest.dropFirst(2).prefix(2))/\(digest).jpg")
        #expect(o.existed == false)
        #expect(FileManager.default.contents(atPath: root.appendingPathComponent(o.path).path) == data)
        // Nothing left in the temp area.
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("tmp").path).isEmpty)
    }

    @Test func writingTheSameBytesAgainIsANoOp() throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        let a = try store.put(Data([1, 2, 3]), ext: "png")
        let b = try store.put(Data([1, 2, 3]), ext: "png")
        #expect(a.path == b.path)
        #expect(b.existed)
    }

    @Test func concurrentWritersOfTheSameBytesLeaveOneObject() async throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = DiskStore(root: root)
        let data = Data((0..<100_000).map { UInt8($0 & 0xFF) })
        let paths = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try store.put(data, ext: "jpg").path } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(paths.count == 1)
        #expect(FileManager.default.contents(atPath: root.appendingPathComponent(paths.first!).path) == data)
    }

    /// A directory on another filesystem than the store's `tmp/` (a mount under the store):
    /// publishing a temp file there fails in the kernel with EXDEV — for any user, root too,
    /// which permission bits would not stop. `/dev/shm` is a tmpfs beside the test's temp dir.
    func otherFilesystem(than root: URL) throws -> URL {
        let elsewhere = URL(fileURLWithPath: "/dev/shm").appendingPathComponent("halcyon-exdev-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        var a = stat(), b = stat()
        try #require(
            stat(root.path, &a) == 0 && stat(elsewhere.path, &b) == 0 && a.st_dev != b.st_dev,
            "needs /dev/shm on another filesystem than \(root.path)")
        return elsewhere
    }

    func isEmpty(_ directory: URL) -> Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).isEmpty
    }

    /// A write that fails after its temp file was written (here the final step, `link` for an
    /// object and `rename` for a key, refused by the kernel) is `store.write_failed`, transient,
    /// leaves nothing at the final path, and removes its temp file.
    @Test func aFailedWriteLeavesNothingAtAFinalPathAndNoTempFile() async throws {
        let root = try makeRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let elsewhere = try otherFilesystem(than: root)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let store = DiskStore(root: root)
        let data = Data("bytes that cannot be published".utf8)
        let final = root.appendingPathComponent(StoreLayout.objectPath(digest: Digest.sha256Hex(data), ext: "jpg"))
        let objectDirectory = final.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: objectDirectory.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: objectDirectory, withDestinationURL: elsewhere)
        #expect { _ = try store.put(data, ext: "jpg") } throws: { error in
            let e = error as? HalcyonError
            return e?.code == .writeFailed && e?.permanent == false && "\(error)".contains("cross-device")
        }
        #expect(!FileManager.default.fileExists(atPath: final.path), "an object was published")
        #expect(isEmpty(elsewhere))
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("tmp").path), "the temp file was never made")
        #expect(
            isEmpty(root.appendingPathComponent("tmp")),
            "a temp file was left: \((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("tmp").path)) ?? [])")

        // A key file (published by rename) the same way: the object is stored, the key is not.
        let key = "k@refused"
        let keyFile = root.appendingPathComponent(StoreLayout.keyPath(for: key))
        try FileManager.default.createDirectory(
            at: keyFile.deletingLastPathComponent().deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: keyFile.deletingLastPathComponent(), withDestinationURL: elsewhere)
        let info = ResultInfo(format: "png", width: 1, height: 1)
        await #expect { _ = try await store.store(Data([1, 2, 3]), ext: "png", info: info, key: key, expiration: .days(1)) } throws: { error in
            (error as? HalcyonError)?.code == .writeFailed && "\(error)".contains("cross-device")
        }
        #expect(!FileManager.default.fileExists(atPath: keyFile.path))
        #expect(isEmpty(elsewhere))
        #expect(isEmpty(root.appendingPathComponent("tmp")), "a key's temp file was left")
        #expect(await store.lookup(key, extend: .none) == nil)
    }
}

@Suite struct OriginalsStoreTests {
    @Test func roundTripsWithExpiryInMtimeAndAccessInAtime() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("orig-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = OriginalsStore(storeRoot: root)
        let expires = Date().addingTimeInterval(3600)
        let saved = Date()
        try await store.save(CachedOriginal(data: Data([1, 2, 3]), etag: "\"abc\"", lastModified: nil, expires: expires), for: "http://x/a.png")
        let back = try #require(await store.original(for: "http://x/a.png"))
        #expect(back.data == Data([1, 2, 3]))
        #expect(back.etag == "\"abc\"")
        #expect(abs(back.expires.timeIntervalSince(expires)) < 0.01)
        #expect(await store.original(for: "http://x/other.png") == nil)

        var st = stat()
        let file = try #require(
            FileManager.default.enumerator(atPath: root.appendingPathComponent("originals").path)?.allObjects
                .compactMap { $0 as? String }.first { $0.count > 10 })
        #expect(stat(root.appendingPathComponent("originals/\(file)").path, &st) == 0)
        #expect(abs(Double(st.st_mtim.tv_sec) - expires.timeIntervalSince1970) <= 2)
        // Accessed between the save and now (whatever a loaded machine made of the time between).
        let accessed = Double(st.st_atim.tv_sec)
        #expect(accessed >= saved.timeIntervalSince1970.rounded(.down) - 1 && accessed <= Date().timeIntervalSince1970 + 1)

        await store.refresh("http://x/a.png", until: expires.addingTimeInterval(60))
        #expect(abs(try #require(await store.original(for: "http://x/a.png")).expires.timeIntervalSince(expires) - 60) < 0.01)
    }
}
