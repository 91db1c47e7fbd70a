import Foundation

/// A downloaded original kept for reuse and revalidation (Kingfisher's original cache plus
/// HTTP validators).
public struct CachedOriginal: Sendable {
    public var data: Data
    public var etag: String?
    public var lastModified: String?
    /// Until when it may be used without asking the origin.
    public var expires: Date

    public init(data: Data, etag: String?, lastModified: String?, expires: Date) {
        self.data = data
        self.etag = etag
        self.lastModified = lastModified
        self.expires = expires
    }

    public var hasValidators: Bool { etag != nil || lastModified != nil }
}

/// Where the fetch stage keeps originals. Implemented by the store; its calls hold no thread of
/// the caller's (a disk's file work runs on an I/O thread, a bucket's requests wait on none).
public protocol OriginalsCache: Sendable {
    /// The cached original for `url`, fresh or not.
    func original(for url: String) async -> CachedOriginal?
    /// Keeps `original` for `url` (replacing any older one).
    func save(_ original: CachedOriginal, for url: String) async throws
    /// Marks the original for `url` fresh until `expires` (after a 304).
    func refresh(_ url: String, until expires: Date) async
}
