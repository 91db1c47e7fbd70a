import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3
import Synchronization

/// The store in an S3 bucket (AWS S3 or any S3-compatible server), under a prefix, with the disk
/// store's layout and contract:
///
/// - `objects/ab/cd/<sha256>.<ext>`: result bytes, written once with `If-None-Match: *` — a
///   concurrent writer of the same bytes gets 412, which is a hit, never an overwrite.
/// - `keys/ab/<sha256(key)>`: the key record (`KeyRecord`'s text), rewritten freely.
/// - `originals/ab/<sha256(url)>`: downloaded originals (`ObjectOriginals`).
/// - Every entry's expiry and last extension are user metadata (`x-amz-meta-halcyon-expires`,
///   `-accessed`, Unix seconds); an object's expiry is the latest any key stored with it needed.
///
/// A hit is one GET of the key (its record and its expiry come in one answer); the object is not
/// read. Extending on use (`cache_time`, or a new expiration) rewrites metadata only — a
/// server-side copy of the entry onto itself, no bytes sent — and only when it moves the expiry by
/// more than a tenth of the time left (at least a minute), so a key hit a thousand times a day
/// costs a few copies, not a thousand. Its requests hold no thread while they wait (`S3Client`).
public struct ObjectStore: ResultStore {
    public let client: S3Client

    /// Metadata names (without `x-amz-meta-`).
    static let expiresField = "halcyon-expires"
    static let accessedField = "halcyon-accessed"
    /// Key records are a few hundred bytes; anything over this is not one.
    static let maxKeyRecordBytes = 65_536

    public init(client: S3Client) {
        self.client = client
    }

    public var location: String { "s3://\(client.configuration.bucket)/\(client.configuration.prefix)" }

    public var originals: any OriginalsCache { ObjectOriginals(client: client) }

    /// `s3://bucket/prefix/objects/…` of a store-relative path (what `halcyon show` prints).
    public func url(forRelativePath path: String) -> String { client.location(ofKey: path) }

    // MARK: Times as metadata

    static func metadata(expires: Date, accessed: Date) -> [String: String] {
        [expiresField: String(seconds(expires)), accessedField: String(seconds(accessed))]
    }

    /// The expiry and last access an entry's metadata records; nil when it has none (not written
    /// by Halcyon, or damaged): such an entry is treated as expired.
    static func times(_ metadata: [String: String]) -> (expires: Date, accessed: Date)? {
        guard let e = metadata[expiresField].flatMap({ Int64($0) }) else { return nil }
        let a = metadata[accessedField].flatMap { Int64($0) } ?? e
        return (Date(timeIntervalSince1970: Double(e)), Date(timeIntervalSince1970: Double(a)))
    }

    /// Whether moving an expiry from `current` to `proposed` is worth a metadata copy: later by
    /// more than a tenth of the time left after it (and at least a minute).
    static func worthExtending(from current: Date, to proposed: Date, now: Date) -> Bool {
        let gain = proposed.timeIntervalSince(current)
        return gain > max(60, proposed.timeIntervalSince(now) / 10)
    }

    static func contentType(ext: String) -> String {
        ImageFormat.allCases.first { $0.fileExtension == ext }.map { "image/\($0 == .jpeg ? "jpeg" : $0.rawValue)" } ?? "application/octet-stream"
    }

    // MARK: Results

    public func store(
        _ data: Data, ext: String, info: ResultInfo, key: String, expiration: StorageExpiration, now: Date
    ) async throws(HalcyonError) -> StoredObject {
        let expiry = expiration.expiry(from: now)
        let object = try await put(data, ext: ext, expires: expiry, now: now)
        let record = KeyRecord(object: object.path, bytes: object.bytes, info: info, key: key)
        _ = try await client.put(
            StoreLayout.keyPath(for: key), data: Data(record.text.utf8), contentType: "text/plain; charset=utf-8",
            metadata: Self.metadata(expires: expiry, accessed: now), ifNoneMatch: false)
        return object
    }

    /// Writes `data` as an object unless it is there; an existing one's expiry is raised to
    /// `expires` when later. An object deleted by a sweep between the 412 and the raise is
    /// written again. A 412 costs a HEAD (the object's expiry), and a metadata copy only when
    /// `expires` is later than the object's by a whole second (metadata holds whole seconds).
    /// The bytes are hashed on an I/O thread, as a disk store's are.
    func put(_ data: Data, ext: String, expires: Date, now: Date) async throws(HalcyonError) -> StoredObject {
        let digest = await onIOThread { Digest.sha256Hex(data) }
        let relative = StoreLayout.objectPath(digest: digest, ext: ext)
        for _ in 0..<3 {
            switch try await client.put(
                relative, data: data, contentType: Self.contentType(ext: ext), metadata: Self.metadata(expires: expires, accessed: now))
            {
            case .created:
                return StoredObject(digest: digest, path: relative, bytes: data.count, existed: false)
            case .alreadyExists:
                if try await raiseExpiry(relative, to: expires, now: now, always: true) {
                    return StoredObject(digest: digest, path: relative, bytes: data.count, existed: true)
                }
            // Gone again (swept): write it.
            }
        }
        throw HalcyonError(.writeFailed, "\(client.location(ofKey: relative)) kept appearing and disappearing while being written")
    }

    /// An instant as the metadata records it: whole Unix seconds, rounded down.
    static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }

    /// Raises the entry's expiry to `target` (never lowers it) and marks it accessed, by a
    /// guarded copy onto itself — only when worth it unless `always`, and never when `target`
    /// is not a whole second later than what the metadata holds. `current` is the entry as a
    /// GET or HEAD just read it (else a HEAD reads it): the copy then costs one request. False
    /// when it is not there.
    @discardableResult
    func raiseExpiry(
        _ key: String, to target: Date, now: Date, always: Bool = false, current: S3ObjectInfo? = nil
    ) async throws(HalcyonError) -> Bool {
        var known = current
        for _ in 0..<3 {
            let read: S3ObjectInfo?
            if let known { read = known } else { read = try await client.head(key) }
            known = nil
            guard let info = read else { return false }
            let expires = Self.times(info.metadata)?.expires ?? .distantPast
            guard Self.seconds(target) > Self.seconds(expires), always || Self.worthExtending(from: expires, to: target, now: now) else {
                return true
            }
            var metadata = info.metadata
            metadata.merge(Self.metadata(expires: target, accessed: now)) { $1 }
            switch try await client.copyMetadata(key, metadata: metadata, ifMatch: info.etag, contentType: info.contentType) {
            case .replaced: return true
            case .notFound: return false
            case .changedConcurrently: continue
            }
        }
        return true
    }

    public func lookup(_ key: String, extend: ExpirationExtending, now: Date) async -> CachedResult? {
        let keyPath = StoreLayout.keyPath(for: key)
        guard let found = try? await client.get(keyPath, maxBytes: Self.maxKeyRecordBytes),
            let times = Self.times(found.info.metadata), times.expires > now,
            let record = KeyRecord(String(decoding: found.data, as: UTF8.self)), record.key == key
        else { return nil }
        var expires = times.expires
        if let extended = extend.extended(accessed: times.accessed, expires: times.expires, now: now),
            Self.worthExtending(from: times.expires, to: extended.expires, now: now)
        {
            // The object first, whenever the key's new expiry is past the object's (not only
            // when that alone would be worth a copy): a key never outlives its object. A failed
            // extension is still a hit; an object found gone is a miss.
            switch try? await raiseExpiry(record.object, to: extended.expires, now: now, always: true) {
            case false?: return nil
            case true?:
                // The key as its GET read it: the copy is one request.
                if (try? await raiseExpiry(keyPath, to: extended.expires, now: now, current: found.info)) == true { expires = extended.expires }
            case nil: break
            }
        }
        return CachedResult(
            object: StoredObject(digest: StoreLayout.digest(ofObjectPath: record.object), path: record.object, bytes: record.bytes, existed: true),
            info: record.info, expires: expires)
    }

    /// Lookups in flight at once for a batch (a claim of hits): each is a round trip.
    static let lookupConcurrency = 16

    /// The batch's lookups, up to `lookupConcurrency` in flight at once (each GET's transfer on
    /// an I/O thread, as every request's).
    public func lookup(_ keys: [(key: String, extend: ExpirationExtending)], now: Date) async -> [String: CachedResult] {
        var seen: Set<String> = []
        let unique = keys.filter { seen.insert($0.key).inserted }
        return await withTaskGroup(of: (String, CachedResult?).self) { group in
            var found: [String: CachedResult] = [:]
            var next = 0
            func start() {
                guard next < unique.count else { return }
                let (key, extend) = unique[next]
                next += 1
                group.addTask { (key, await lookup(key, extend: extend, now: now)) }
            }
            for _ in 0..<Self.lookupConcurrency { start() }
            for await (key, hit) in group {
                if let hit { found[key] = hit }
                start()
            }
            return found
        }
    }

    // MARK: Objects by digest (the dashboard)

    /// The object's key for `digest`, found by listing `objects/ab/cd/<digest>.` (one request;
    /// the extension is not known from the digest).
    func objectKey(digest: String) async -> (key: String, format: ImageFormat, bytes: Int)? {
        guard StoreLayout.isDigest(digest) else { return nil }
        let prefix = String(StoreLayout.objectPath(digest: digest, ext: "").dropLast())
        guard let page = try? await client.list(prefix: prefix + ".", maxKeys: 10) else { return nil }
        for entry in page.entries {
            let ext = String(entry.key.dropFirst(prefix.count + 1))
            if let format = ImageFormat.allCases.first(where: { $0.fileExtension == ext }) { return (entry.key, format, entry.size) }
        }
        return nil
    }

    /// Bytes per ranged GET when an object is read in pieces: a request's round trip against
    /// the memory one read holds.
    static let readChunkBytes = 512 << 10

    /// The object for `digest`, opened with a listing (its key) and a ranged GET of its first
    /// chunk, which brings its size, ETag and expiry; later chunks are ranged GETs with
    /// `If-Match: ETAG`, so an object replaced or deleted while it is read ends the reading
    /// (`store.read_failed`) rather than mixing bytes.
    public func openObject(digest: String, maxBytes: Int) async throws(HalcyonError) -> (any ObjectReader)? {
        guard let (key, format, listed) = await objectKey(digest: digest), listed <= maxBytes else { return nil }
        let chunk = Self.readChunkBytes
        guard case .bytes(let first, let info) = try await client.get(key, range: 0..<min(chunk, max(1, listed))) else { return nil }
        guard info.size <= maxBytes, let times = Self.times(info.metadata) else { return nil }
        guard info.size <= first.count || info.etag != nil else {
            throw HalcyonError(
                .readFailed, "\(client.location(ofKey: key)): the server sent no ETag, so the object cannot be read in pieces safely",
                source: client.location(ofKey: key))
        }
        return BucketObjectReader(
            client: client, key: key, etag: info.etag, format: format, bytes: info.size, expires: times.expires, chunkBytes: chunk, first: first)
    }

    public func objectInfo(digest: String) async -> ObjectInfo? {
        guard let (key, format, bytes) = await objectKey(digest: digest), let info = try? await client.head(key),
            let times = Self.times(info.metadata)
        else { return nil }
        return ObjectInfo(format: format, bytes: bytes, expires: times.expires)
    }

    /// A URL that fetches the object at `path` (store-relative) without credentials for `valid`.
    public func presignedURL(forRelativePath path: String, valid: Duration) throws(HalcyonError) -> URL {
        try client.presignedGetURL(path, expires: valid)
    }

    /// The key's expiry and last extension, from its metadata (`halcyon show`); nil when there
    /// is no such key (or it carries no expiry). Throws when the bucket cannot be asked
    /// (`store.read_failed`, `store.access_denied`): that is not an absent key.
    public func keyTimes(_ key: String) async throws(HalcyonError) -> (expires: Date, accessed: Date)? {
        try await client.head(StoreLayout.keyPath(for: key)).flatMap { Self.times($0.metadata) }
    }

    public func sweep(sizeLimit: Int64?, now: Date, cancel: CancellationFlag?) async -> SweepReport {
        await ObjectStoreSweeper(store: self, sizeLimit: sizeLimit).sweep(now: now, cancel: cancel)
    }

    public func verify(repair: Bool) async -> VerifyReport {
        await ObjectStoreSweeper(store: self, sizeLimit: nil).verify(repair: repair)
    }

    public func checkAccess() async throws(HalcyonError) {
        _ = try await client.list(maxKeys: 1)
    }

    /// Nil: a bucket says nothing of its room.
    public func space() async -> StoreSpace? { nil }

    /// Puts a small object under `tmp/` and deletes it (a failed delete leaves those few bytes).
    public func probeWrite() async throws(HalcyonError) {
        let key = "\(StoreLayout.tmpDirectory)/probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        _ = try await client.put(key, data: Data("halcyon probe\n".utf8), contentType: "text/plain", ifNoneMatch: false)
        try? await client.delete(key)
    }
}

/// An object in a bucket read range by range, each GET guarded by the ETag it had when opened.
final class BucketObjectReader: ObjectReader {
    let client: S3Client
    let key: String
    let etag: String?
    let format: ImageFormat
    let bytes: Int
    let expires: Date
    let chunkBytes: Int
    /// The first chunk, read at the open: handed out by the first read that starts at 0.
    private let first: Mutex<Data?>

    init(client: S3Client, key: String, etag: String?, format: ImageFormat, bytes: Int, expires: Date, chunkBytes: Int, first: Data) {
        self.client = client
        self.key = key
        self.etag = etag
        self.format = format
        self.bytes = bytes
        self.expires = expires
        self.chunkBytes = chunkBytes
        self.first = Mutex(first)
    }

    func read(_ range: Range<Int>) async throws(HalcyonError) -> Data {
        let location = client.location(ofKey: key)
        guard range.lowerBound >= 0, range.upperBound <= bytes else {
            throw HalcyonError(.readFailed, "\(location): bytes \(range) are outside the object's \(bytes)", source: location)
        }
        if range.isEmpty { return Data() }
        if range.lowerBound == 0, let first = first.withLock({ $0.take() }), first.count >= range.count {
            return range.count == first.count ? first : first.prefix(range.count)
        }
        switch try await client.get(key, range: range, ifMatch: etag) {
        case .bytes(let data, let info):
            guard data.count == range.count, info.size == bytes else {
                throw HalcyonError(
                    .readFailed, "\(location): bytes \(range) answered \(data.count) bytes of an object of \(info.size) (opened at \(bytes))",
                    source: location)
            }
            return data
        case .changed:
            throw HalcyonError(.readFailed, "\(location) was replaced while it was being read (its ETag changed)", source: location)
        case .notFound:
            throw HalcyonError(.readFailed, "\(location) was deleted while it was being read", source: location)
        }
    }

    func close() {
        first.withLock { $0 = nil }
    }
}
