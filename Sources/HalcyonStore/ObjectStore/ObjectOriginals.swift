import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3

/// Downloaded originals in the bucket, `originals/ab/<sha256(url)>`, in the disk store's format
/// (`OriginalBlob`), their expiry in metadata as every entry's.
public struct ObjectOriginals: OriginalsCache {
    public let client: S3Client
    /// The largest original read back: the fetch stage's own limit is far below.
    static let maxBytes = 1 << 30

    public init(client: S3Client) {
        self.client = client
    }

    static func key(for url: String) -> String {
        StoreLayout.originalPath(for: url)
    }

    public func original(for url: String) async -> CachedOriginal? {
        guard let object = try? await client.get(Self.key(for: url), maxBytes: Self.maxBytes),
            let (data, etag, lastModified) = OriginalBlob.decode(object.data, url: url),
            let times = ObjectStore.times(object.info.metadata)
        else { return nil }
        return CachedOriginal(data: data, etag: etag, lastModified: lastModified, expires: times.expires)
    }

    public func save(_ original: CachedOriginal, for url: String) async throws {
        _ = try await client.put(
            Self.key(for: url), data: OriginalBlob.encode(original, url: url),
            metadata: ObjectStore.metadata(expires: original.expires, accessed: Date()), ifNoneMatch: false)
    }

    public func refresh(_ url: String, until expires: Date) async {
        let key = Self.key(for: url)
        // A HEAD and one guarded copy (the copy reuses what the HEAD read).
        guard let info = try? await client.head(key) else { return }
        _ = try? await client.copyMetadata(
            key, metadata: ObjectStore.metadata(expires: expires, accessed: Date()), ifMatch: info.etag, contentType: info.contentType)
    }
}
