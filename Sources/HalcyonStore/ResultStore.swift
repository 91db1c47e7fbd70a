import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3

/// A stored result's bytes, read by its content address.
public struct ObjectFile: Sendable {
    public var data: Data
    public var format: ImageFormat
    /// The object's expiry.
    public var expires: Date
}

/// A stored object opened to be read in pieces (the dashboard streams results through one, a
/// chunk at a time): every read gives the object's bytes as they were when it was opened, or
/// fails — never another object's. On disk it holds the file open (a sweep that deletes the file
/// meanwhile changes nothing it reads), and a read is a `pread` on an I/O thread; in a bucket each
/// read is a ranged GET guarded by the ETag read at the open (`If-Match`).
public protocol ObjectReader: AnyObject, Sendable {
    var format: ImageFormat { get }
    /// The object's size.
    var bytes: Int { get }
    /// The object's expiry.
    var expires: Date { get }
    /// What one read should ask for: a read's cost (a system call on disk, a request to a
    /// bucket) against the memory it holds.
    var chunkBytes: Int { get }
    /// Bytes `range` of the object, exactly (`range` within `0..<bytes`). `store.read_failed`
    /// when they cannot be read as the object was when it was opened (in a bucket: it has been
    /// replaced or deleted since, or the server sent something else).
    func read(_ range: Range<Int>) async throws(HalcyonError) -> Data
    /// Lets go of what the reader holds (its descriptor); later reads fail. Also done when the
    /// reader goes away.
    func close()
}

/// A reader of a local file, which can also read straight into a caller's buffer: a caller that
/// reads chunk after chunk into one buffer of its own allocates nothing per chunk (a `pread`
/// straight into it). That read blocks: call it on an I/O thread (`Blocking.run`).
public protocol LocalObjectReader: ObjectReader {
    /// Bytes `range` written into `buffer` (`range.count` bytes long), as `read(_:)` gives them.
    func read(_ range: Range<Int>, into buffer: UnsafeMutableRawBufferPointer) throws(HalcyonError)
}

/// What is known of a stored object without reading it.
public struct ObjectInfo: Sendable {
    public var format: ImageFormat
    public var bytes: Int
    /// The object's expiry.
    public var expires: Date
}

/// Where results are kept, as the worker, the dashboard and the store commands use it: a
/// directory (`DiskStore`) or an S3 bucket (`ObjectStore`), with one layout — `objects/ab/cd/
/// <sha256>.<ext>`, `keys/ab/<sha256(key)>`, `originals/ab/<sha256(url)>` (`StoreLayout`) — and
/// one contract: objects are written once and never changed, keys name their object and image
/// facts, every entry carries its expiry. Every method is `async` and holds no thread of the
/// caller's: a directory's file work runs on an I/O thread (`Blocking.run`), a bucket's requests
/// each try on one and wait between tries on none.
public protocol ResultStore: Sendable {
    /// Where it is, for logs, reports and `halcyon.store_sweeps`: a path or `s3://bucket/prefix`.
    var location: String { get }

    /// A hit for `key` (an unexpired key whose object is there as far as the store can tell
    /// cheaply), with `extend` applied; nil on a miss or any error (a broken entry is a miss).
    func lookup(_ key: String, extend: ExpirationExtending, now: Date) async -> CachedResult?

    /// The hits among `keys` (each looked up once, with the first `extend` given for it), by key.
    /// A store whose lookups wait on a network makes them side by side.
    func lookup(_ keys: [(key: String, extend: ExpirationExtending)], now: Date) async -> [String: CachedResult]

    /// Stores a job's result: the object (written once; an existing one's expiry raised to this
    /// key's if later), then the key naming it. `store.write_failed` (or `store.access_denied`)
    /// when it cannot; nothing partial is ever visible.
    func store(
        _ data: Data, ext: String, info: ResultInfo, key: String, expiration: StorageExpiration, now: Date
    ) async throws(HalcyonError) -> StoredObject

    /// The object whose SHA-256 is `digest`, opened to be read in pieces; nil when `digest` is
    /// not a content address, when there is no such object, or when it is over `maxBytes`.
    /// Throws (`store.read_failed`, `store.access_denied`) when the store could not tell.
    func openObject(digest: String, maxBytes: Int) async throws(HalcyonError) -> (any ObjectReader)?

    /// The format, size and expiry of the object whose SHA-256 is `digest`.
    func objectInfo(digest: String) async -> ObjectInfo?

    /// Where the fetch stage keeps downloaded originals in this store.
    var originals: any OriginalsCache { get }

    /// One sweep: expired entries, dangling keys, the size limit (see each store's sweeper).
    func sweep(sizeLimit: Int64?, now: Date, cancel: CancellationFlag?) async -> SweepReport

    /// Re-hashes every object (`halcyon verify`); `repair` removes the corrupt ones.
    func verify(repair: Bool) async -> VerifyReport

    /// Checks that this process may use the store: for a bucket, a signed list of the prefix (a
    /// wrong key or secret is `store.access_denied`, a missing bucket `store.read_failed`); for a
    /// directory, that a file can be made in it. A worker checks at start and refuses to run
    /// without access, and while the store refuses it later.
    func checkAccess() async throws(HalcyonError)

    /// The free and total bytes of the store's filesystem (`statvfs`); nil for a bucket, which
    /// says nothing of its room.
    func space() async -> StoreSpace?

    /// Writes a small probe and removes it: whether the store takes a write now (`checkAccess`
    /// shows only that it lets this process in). Throws what a result's write would
    /// (`store.not_writable`, `store.access_denied`, `store.write_failed`).
    func probeWrite() async throws(HalcyonError)
}

/// The room on a disk store's filesystem, as `statvfs` gives it.
public struct StoreSpace: Sendable, Equatable {
    /// Bytes free to an unprivileged writer (`f_bavail`: what `df` calls available).
    public var freeBytes: Int64
    /// The filesystem's size.
    public var totalBytes: Int64

    public init(freeBytes: Int64, totalBytes: Int64) {
        self.freeBytes = freeBytes
        self.totalBytes = totalBytes
    }
}

extension ResultStore {
    /// The object whose SHA-256 is `digest`, read whole, when there is one of at most `maxBytes`.
    public func object(digest: String, maxBytes: Int) async -> ObjectFile? {
        guard let reader = try? await openObject(digest: digest, maxBytes: maxBytes) else { return nil }
        defer { reader.close() }
        guard let data = try? await reader.read(0..<reader.bytes) else { return nil }
        return ObjectFile(data: data, format: reader.format, expires: reader.expires)
    }

    /// One after another.
    public func lookup(_ keys: [(key: String, extend: ExpirationExtending)], now: Date) async -> [String: CachedResult] {
        var found: [String: CachedResult] = [:], seen: Set<String> = []
        for (key, extend) in keys where seen.insert(key).inserted { found[key] = await lookup(key, extend: extend, now: now) }
        return found
    }

    public func lookup(_ key: String, extend: ExpirationExtending) async -> CachedResult? {
        await lookup(key, extend: extend, now: Date())
    }

    public func store(
        _ data: Data, ext: String, info: ResultInfo, key: String, expiration: StorageExpiration
    ) async throws(HalcyonError)
        -> StoredObject
    {
        try await store(data, ext: ext, info: info, key: key, expiration: expiration, now: Date())
    }
}

/// Runs `body` on an I/O thread (`Blocking.run`), throwing what it throws as it is (nothing, for
/// a body that throws nothing): the stores' file work, off the caller's thread.
func onIOThread<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    // `run` throws only what its body does, and this body throws nothing: its error is in the Result.
    let result = try! await Blocking.run(.io) { Result { () throws(E) -> T in try body() } }
    return try result.get()
}

/// Where a store is, as `--store` / `HALCYON_STORE` name it: a directory, or
/// `s3://BUCKET[/PREFIX]` with the AWS variables of the environment.
public enum StoreLocation: Sendable, CustomStringConvertible {
    case directory(URL)
    case objectStore(S3Configuration)

    /// A path (relative ones from the current directory) or `s3://…`; any other `scheme://` is
    /// refused (`job.invalid_options`) rather than taken for a directory.
    public init(parsing text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(HalcyonError) {
        if text.lowercased().hasPrefix("s3://") {
            self = .objectStore(try S3Configuration(url: text, environment: environment))
            return
        }
        if let scheme = text.range(of: "://").map({ text[..<$0.lowerBound] }), !scheme.isEmpty, !scheme.contains("/") {
            throw HalcyonError(.invalidOptions, "--store takes a directory or s3://BUCKET[/PREFIX]; \(scheme):// is not supported")
        }
        self = .directory(URL(fileURLWithPath: text).standardizedFileURL)
    }

    /// The store there: checks the S3 configuration (`job.invalid_options`).
    public func open() throws(HalcyonError) -> any ResultStore {
        switch self {
        case .directory(let root): DiskStore(root: root)
        case .objectStore(let configuration): try ObjectStore(client: S3Client(configuration: configuration))
        }
    }

    /// The directory, or nil for an object store.
    public var directory: URL? {
        if case .directory(let url) = self { return url }
        return nil
    }

    /// A path or `s3://bucket/prefix` (never a credential).
    public var description: String {
        switch self {
        case .directory(let url): url.path
        case .objectStore(let c): "s3://\(c.bucket)/\(c.prefix)"
        }
    }
}
