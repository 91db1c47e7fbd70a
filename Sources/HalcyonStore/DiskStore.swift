import Foundation
import HalcyonDomain
import HalcyonRuntime

/// Where a stored object lives and what it is.
public struct StoredObject: Sendable, Equatable {
    /// SHA-256 hex of the bytes.
    public var digest: String
    /// Path relative to the store root: `objects/ab/cd/<digest>.<ext>`.
    public var path: String
    public var bytes: Int
    /// True when the object was already there (nothing was written).
    public var existed: Bool
}

/// What a key records about its result besides the object, so that a hit fills a job's
/// `result_*` columns without reading the image.
public struct ResultInfo: Sendable, Equatable {
    /// `jpeg`, `png`, …
    public var format: String
    public var width: Int
    public var height: Int
    /// The source's facts (never its GPS position) and the result's placeholders (a JSON
    /// object's text), when the job that stored it had them: a hit relays them as they are.
    public var source: SourceRecord?
    public var placeholdersJSON: String?
    /// The encoder quality and the perceptual score the result was stored with, when known (held
    /// to `ResultMeasures`' bounds): a hit reports the same.
    public var quality: Int?
    public var score: Double?
    /// Whether the quality was `quality` and a half (a JPEG search's last step).
    public var halfQuality = false
    /// A JPEG's chroma sampling, when known.
    public var chroma: ChromaSampling?
    /// The PDQ hashes of the source and of the result, when the job that stored it computed them.
    public var sourceHash: PerceptualHash?
    public var outputHash: PerceptualHash?
    /// The source's seven other dihedral hashes, when the job asked for them.
    public var sourceVariants: [String]?
    /// A picture set's rungs (`PictureManifest.storedJSON`), when the result is one.
    public var manifestJSON: String?

    public init(
        format: String, width: Int, height: Int, source: SourceRecord? = nil, placeholdersJSON: String? = nil, quality: Int? = nil,
        halfQuality: Bool = false, score: Double? = nil, chroma: ChromaSampling? = nil
    ) {
        self.format = format
        self.width = width
        self.height = height
        self.source = source
        self.placeholdersJSON = placeholdersJSON
        self.quality = ResultMeasures.quality(quality)
        self.halfQuality = halfQuality && ResultMeasures.exactQuality(quality, half: true) != nil
        self.score = ResultMeasures.score(score)
        self.chroma = chroma
    }

    /// A new result's info: `source` is kept without its GPS position.
    public init(
        format: String, width: Int, height: Int, facts: SourceFacts?, placeholders: Placeholders?, quality: Int? = nil,
        halfQuality: Bool = false, score: Double? = nil, chroma: ChromaSampling? = nil
    ) {
        self.init(
            format: format, width: width, height: height, source: facts.map { SourceRecord($0.withoutPosition) },
            placeholdersJSON: placeholders?.json.jsonText, quality: quality, halfQuality: halfQuality, score: score, chroma: chroma)
    }
}

/// A store hit.
public struct CachedResult: Sendable, Equatable {
    public var object: StoredObject
    public var info: ResultInfo
    /// The key's expiry after the hit (and any extension it made).
    public var expires: Date
}

/// The content-addressed disk store (ARCHITECTURE.md §6), Kingfisher's DiskStorage made
/// content-addressed:
///
/// - `objects/ab/cd/<sha256>.<ext>`: immutable result bytes, written through `AtomicFile`
///   (temp file, fsync, published without replacing, directory fsync).
/// - `keys/ab/<sha256(key)>`: one small text file per result key (`cache_key@identifier`)
///   naming its object, size and image facts. Several keys may share an object.
/// - times (`FileTimes`): mtime = expiry, atime = last access, on keys and objects alike; an
///   object's expiry is the latest any key written to it needed.
///
/// Keys are files rather than symlinks: following or reading a symlink moves its atime under
/// the kernel's relatime rule (atime < mtime always holds here), which would corrupt the
/// mtime − atime TTL; a file opened `O_NOATIME` keeps it, and carries the image facts.
/// Its `ResultStore` calls run their file work on an I/O thread (`Blocking.run`); `put`, the
/// `Sweeper` and the `Verifier` block: call them from one.
public struct DiskStore: Sendable {
    public let root: URL
    /// `root`'s path, kept: a hit joins paths for two files, and `URL` would parse each.
    let rootPath: String

    public init(root: URL) {
        self.root = root.standardizedFileURL
        rootPath = self.root.path
    }

    public func url(forRelativePath path: String) -> URL {
        root.appendingPathComponent(path)
    }

    /// The file system path of a path relative to the root.
    func path(forRelativePath path: String) -> String {
        rootPath.hasSuffix("/") ? rootPath + path : rootPath + "/" + path
    }

    var tmpDirectory: URL { root.appendingPathComponent(StoreLayout.tmpDirectory) }

    // MARK: Objects

    /// Stores `data` as an object with extension `ext` (e.g. `jpg`) that lives at least until
    /// `expires` (default: 7 days): written if absent, else its expiry is raised to `expires`
    /// if later and its atime set to `now` — a cheap no-op for bytes already stored. Throws
    /// `store.write_failed` (nothing partial is left at a final path). Blocking.
    public func put(_ data: Data, ext: String, expires: Date? = nil, now: Date = Date()) throws(HalcyonError) -> StoredObject {
        let digest = Digest.sha256Hex(data)
        let relative = StoreLayout.objectPath(digest: digest, ext: ext)
        let final = url(forRelativePath: relative)
        let expiry = expires ?? StorageExpiration.days(7).expiry(from: now)
        for _ in 0..<3 {
            if try touchObject(final.path, atLeastUntil: expiry, now: now) {
                return StoredObject(digest: digest, path: relative, bytes: data.count, existed: true)
            }
            let outcome = try AtomicFile.write(data, to: final, tmpDirectory: tmpDirectory, publish: .keepExisting) { fd in
                FileTimes(accessed: now, expires: expiry).write(to: fd)
            }
            if outcome == .written {
                return StoredObject(digest: digest, path: relative, bytes: data.count, existed: false)
            }
            // Another writer published the same bytes first: extend theirs.
        }
        throw HalcyonError(.writeFailed, "\(relative) kept appearing and disappearing while being written")
    }

    /// Marks an existing object accessed now and raises its expiry to `expiry` (never lowers
    /// it), under its lock. False when it is not there.
    func touchObject(_ path: String, atLeastUntil expiry: Date, now: Date) throws(HalcyonError) -> Bool {
        try withLockedFile(path) { fd, st throws(HalcyonError) -> Bool in
            guard FileTimes(accessed: now, expires: max(FileTimes(st).expires, expiry)).write(to: fd) else {
                throw storeWriteError(errno, "cannot set the times of \(path)")
            }
            return true
        } ?? false
    }

    // MARK: Keys

    /// Stores a job's result: the object (its expiry raised to this key's if later), then the
    /// key's file pointing at it, with atime = now and mtime = the expiry `expiration` gives.
    /// `expired` stores both already expired: the job gets its result, later jobs miss, and the
    /// next sweep removes them. Blocking (`store(_:ext:info:key:expiration:now:)` runs it on an
    /// I/O thread).
    func storeBlocking(
        _ data: Data, ext: String, info: ResultInfo, key: String, expiration: StorageExpiration, now: Date
    ) throws(HalcyonError) -> StoredObject {
        let expiry = expiration.expiry(from: now)
        let object = try put(data, ext: ext, expires: expiry, now: now)
        let record = KeyRecord(object: object.path, bytes: object.bytes, info: info, key: key)
        try AtomicFile.write(
            Data(record.text.utf8), to: url(forRelativePath: StoreLayout.keyPath(for: key)), tmpDirectory: tmpDirectory,
            durable: false
        ) { fd in
            // Not fsynced: a key lost in a crash is only a cache miss.
            FileTimes(accessed: now, expires: expiry).write(to: fd)
        }
        return object
    }

    /// Looks `key` up: a hit is an unexpired key whose object is there and unexpired. A hit
    /// marks the object accessed (atime = now: size trims remove the least recently accessed,
    /// so an object in use must look used) and applies `extend`: `none` leaves every expiry and
    /// the key's times as they were; otherwise the key gets atime = now and its new expiry, and
    /// the object the later of its expiry and the key's. Nil on a miss, or on any error (a
    /// broken store file is a miss, not a failure). Blocking (`lookup(_:extend:now:)` runs it on
    /// an I/O thread).
    func lookupBlocking(_ key: String, extend: ExpirationExtending, now: Date) -> CachedResult? {
        let keyPath = self.path(forRelativePath: StoreLayout.keyPath(for: key))
        let found = try? withLockedFile(keyPath) { fd, st throws(HalcyonError) -> CachedResult? in
            let keyTimes = FileTimes(st)
            guard keyTimes.expires > now else { return nil }
            guard let text = Self.readSmall(fd), let record = KeyRecord(text), record.key == key else { return nil }
            let extended = extend.extended(accessed: keyTimes.accessed, expires: keyTimes.expires, now: now)
            let objectPath = self.path(forRelativePath: record.object)
            let objectAlive =
                try withLockedFile(objectPath) { ofd, ost -> Bool in
                    let objectTimes = FileTimes(ost)
                    guard objectTimes.expires > now else { return false }
                    FileTimes(accessed: now, expires: max(objectTimes.expires, extended?.expires ?? objectTimes.expires)).write(to: ofd)
                    return true
                } ?? false
            guard objectAlive else { return nil }
            // Also puts back an atime the read moved where O_NOATIME was not allowed.
            let newTimes = extended.map { FileTimes(accessed: $0.accessed, expires: $0.expires) } ?? keyTimes
            newTimes.write(to: fd)
            return CachedResult(
                object: StoredObject(
                    digest: StoreLayout.digest(ofObjectPath: record.object), path: record.object, bytes: record.bytes, existed: true),
                info: record.info, expires: newTimes.expires)
        }
        return found ?? nil
    }

    /// Reads a key file whole (keys are a few hundred bytes; anything over 64 KiB is not one).
    static func readSmall(_ fd: Int32) -> String? {
        readWhole(fd, limit: 65_536).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// A key file's contents: text lines of `name value`, readable with `cat`.
///
///     halcyon-key 1
///     object objects/ab/cd/<sha256>.jpg
///     bytes 18234
///     image jpeg 320x320
///     source jpeg 1920x1080 482113 {"frames":1,"has_alpha":false,"orientation":1}
///     placeholders {"blurhash":"LEHV6nWB2yk8pyo0adR*.7kCMdnj"}
///     quality 82.5
///     score 87.31
///     source_pdq f8f8f0cee0f4a84f06370a22038f63f0b36e2ed596621e1d33e6b39c4e9c9b22 100
///     manifest {"rungs":[{"bytes":9120,"format":"avif","height":213,"path":"objects/…","quality":61,"score":80.4,"width":320},…]}
///     key https://example.com/cat.jpg@resize(320x320,mode=fill)
///
/// `source` (format, size, bytes, then `source_meta`'s JSON), `placeholders`, `quality` (the
/// encoder's, 1–100, with `.5` for a half quality), `score` (SSIMULACRA2, 0–100, two decimals)
/// `source_pdq`/`result_pdq` (PDQ hashes and their qualities) and `manifest` (a picture set's
/// rungs, each stored under a key of its own) are there when the job that
/// stored the key had them (records written before they existed lack them). Their JSON is relayed
/// to the row, not decoded on a hit (a hit stays a file read and a few splits) — but a manifest,
/// read to check it and to find the set's rungs. A `quality`,
/// `score` or hash that does not read as one is left out of the hit, as if absent.
struct KeyRecord: Equatable {
    var object: String
    var bytes: Int
    var info: ResultInfo
    var key: String

    var text: String {
        let escaped = key.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
            .replacingOccurrences(of: "\u{0}", with: "\\0")
        var text = "halcyon-key 1\nobject \(object)\nbytes \(bytes)\nimage \(info.format) \(info.width)x\(info.height)\n"
        if let s = info.source { text += "source \(s.format) \(s.width)x\(s.height) \(s.bytes) \(s.metaJSON)\n" }
        if let placeholders = info.placeholdersJSON { text += "placeholders \(placeholders)\n" }
        if let quality = ResultMeasures.exactQuality(info.quality, half: info.halfQuality) {
            text += info.halfQuality ? "quality \(quality)\n" : "quality \(Int(quality))\n"
        }
        if let score = info.score { text += "score \(score)\n" }
        if let chroma = info.chroma { text += "chroma \(chroma.rawValue)\n" }
        if let h = info.sourceHash { text += "source_pdq \(h.hex) \(h.quality)\n" }
        if let h = info.outputHash { text += "result_pdq \(h.hex) \(h.quality)\n" }
        if let v = info.sourceVariants { text += "source_pdq_dihedral \(v.joined(separator: ","))\n" }
        if let m = info.manifestJSON { text += "manifest \(m)\n" }
        return text + "key \(escaped)\n"
    }

    init(object: String, bytes: Int, info: ResultInfo, key: String) {
        self.object = object
        self.bytes = bytes
        self.info = info
        self.key = key
    }

    /// `<64 hex digits> <quality>`; nil when malformed (the hit then has no hash).
    static func hash(_ line: Substring) -> PerceptualHash? {
        let parts = line.split(separator: " ")
        guard parts.count == 2, let quality = Int(parts[1]) else { return nil }
        return PerceptualHash(hex: parts[0], quality: quality)
    }

    /// `jpeg 1920x1080 482113 {…}`; nil when malformed (the hit then has no facts).
    static func source(_ line: Substring) -> SourceRecord? {
        let parts = line.split(separator: " ", maxSplits: 3)
        guard parts.count == 4, let x = parts[1].firstIndex(of: "x"), let width = Int(parts[1][..<x]),
            let height = Int(parts[1][parts[1].index(after: x)...]), let bytes = Int(parts[2]), parts[3].hasPrefix("{"), parts[3].hasSuffix("}")
        else { return nil }
        return SourceRecord(width: width, height: height, format: String(parts[0]), bytes: bytes, metaJSON: String(parts[3]))
    }

    /// Nil for anything but a complete record. Read as bytes: a store hit parses one per job.
    init?(_ text: String) {
        var version, object, bytesField, image, source, placeholders, quality, score, chroma, sourcePDQ, resultPDQ, dihedral, manifest,
            key: Substring?
        for line in text.utf8.split(separator: UInt8(ascii: "\n")) {
            guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return nil }
            let value = Substring(line[line.index(after: space)...])
            switch Substring(line[..<space]) {
            case "halcyon-key": version = value
            case "object": object = value
            case "bytes": bytesField = value
            case "image": image = value
            case "source": source = value
            case "placeholders": placeholders = value
            case "quality": quality = value
            case "score": score = value
            case "chroma": chroma = value
            case "source_pdq": sourcePDQ = value
            case "result_pdq": resultPDQ = value
            case "source_pdq_dihedral": dihedral = value
            case "manifest": manifest = value
            case "key": key = value
            default: continue
            }
        }
        guard version == "1", let object, StoreLayout.isObjectPath(object),
            let bytes = bytesField.flatMap({ Int($0) }),
            let image = image?.split(separator: " "), image.count == 2,
            let size = Optional(image[1].split(separator: "x")), size.count == 2,
            let width = Int(size[0]), let height = Int(size[1]), let key
        else { return nil }
        self.object = String(object)
        self.bytes = bytes
        let exact = quality.flatMap(ResultMeasures.exactQuality(text:))
        self.info = ResultInfo(
            format: String(image[0]), width: width, height: height, source: source.flatMap(Self.source),
            placeholdersJSON: placeholders.flatMap { $0.hasPrefix("{") && $0.hasSuffix("}") ? String($0) : nil },
            quality: exact?.quality, halfQuality: exact?.half ?? false, score: score.flatMap(ResultMeasures.score(text:)),
            chroma: chroma.flatMap { ChromaSampling(rawValue: String($0)) })
        info.sourceHash = sourcePDQ.flatMap(Self.hash)
        info.outputHash = resultPDQ.flatMap(Self.hash)
        info.sourceVariants = dihedral.flatMap { line in
            let hashes = line.split(separator: ",").map(String.init)
            return hashes.count == 7 && hashes.allSatisfy { PerceptualHash(hex: $0, quality: 0) != nil } ? hashes : nil
        }
        info.manifestJSON = manifest.flatMap { PictureManifest(jsonText: String($0)) != nil ? String($0) : nil }
        guard key.utf8.contains(UInt8(ascii: "\\")) else {
            self.key = String(key)
            return
        }
        var unescaped: [UInt8] = [], escaping = false
        for b in key.utf8 {
            if escaping {
                unescaped.append(b == UInt8(ascii: "n") ? UInt8(ascii: "\n") : b == UInt8(ascii: "0") ? 0 : b)
                escaping = false
            } else if b == UInt8(ascii: "\\") {
                escaping = true
            } else {
                unescaped.append(b)
            }
        }
        self.key = String(decoding: unescaped, as: UTF8.self)
    }
}
