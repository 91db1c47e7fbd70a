import Foundation
import HalcyonDomain
import HalcyonRuntime

/// Downloaded originals under `<store>/originals/ab/<sha256(url)>`: one file holding a small
/// JSON header (url, ETag, Last-Modified) and the body, written to `tmp/` and renamed into
/// place. As everywhere in the store, the expiry is the file's mtime and the last access its
/// atime, both set explicitly. The file work runs on an I/O thread.
public struct OriginalsStore: OriginalsCache {
    public let root: URL

    public init(storeRoot: URL) {
        root = storeRoot.standardizedFileURL
    }

    func path(for url: String) -> URL {
        root.appendingPathComponent(StoreLayout.originalPath(for: url))
    }

    public func original(for url: String) async -> CachedOriginal? {
        let file = path(for: url)
        return await onIOThread { () -> CachedOriginal? in
            guard let blob = FileManager.default.contents(atPath: file.path),
                let (data, etag, lastModified) = OriginalBlob.decode(blob, url: url),
                let expires = FileTimes.read(file.path)?.expires
            else { return nil }
            FileTimes(accessed: Date(), expires: expires).write(to: file.path)
            return CachedOriginal(data: data, etag: etag, lastModified: lastModified, expires: expires)
        }
    }

    public func save(_ original: CachedOriginal, for url: String) async throws {
        let file = path(for: url), tmp = root.appendingPathComponent(StoreLayout.tmpDirectory)
        try await onIOThread { () throws(HalcyonError) in
            _ = try AtomicFile.write(OriginalBlob.encode(original, url: url), to: file, tmpDirectory: tmp) { fd in
                FileTimes(accessed: Date(), expires: original.expires).write(to: fd)
            }
        }
    }

    public func refresh(_ url: String, until expires: Date) async {
        let file = path(for: url)
        await onIOThread { _ = FileTimes(accessed: Date(), expires: expires).write(to: file.path) }
    }
}

/// A kept original as stored, on disk or in a bucket: a 4-byte big-endian header length, the
/// header (JSON: url, ETag, Last-Modified), then the body.
enum OriginalBlob {
    static func encode(_ original: CachedOriginal, url: String) -> Data {
        var header: [String: JSONValue] = ["url": .string(url)]
        if let e = original.etag { header["etag"] = .string(e) }
        if let m = original.lastModified { header["last_modified"] = .string(m) }
        let headerBytes = Data(JSONValue.object(header).jsonText.utf8)
        let n = UInt32(headerBytes.count)
        var blob = Data([UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)])
        blob.append(headerBytes)
        blob.append(original.data)
        return blob
    }

    /// The body and validators, when `blob` is an original kept for `url`.
    static func decode(_ blob: Data, url: String) -> (data: Data, etag: String?, lastModified: String?)? {
        guard blob.count >= 4 else { return nil }
        let headerLength = Int(blob.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard blob.count >= 4 + headerLength,
            case .object(let header)? = JSONValue.parse(String(decoding: blob.dropFirst(4).prefix(headerLength), as: UTF8.self)),
            header["url"]?.stringValue == url
        else { return nil }
        return (Data(blob.dropFirst(4 + headerLength)), header["etag"]?.stringValue, header["last_modified"]?.stringValue)
    }
}
