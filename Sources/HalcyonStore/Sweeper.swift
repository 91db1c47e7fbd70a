import Foundation
import HalcyonRuntime

/// What one sweep removed and left.
public struct SweepReport: Sendable, Equatable {
    public var expiredObjects = 0
    public var expiredBytes: Int64 = 0
    public var trimmedObjects = 0
    public var trimmedBytes: Int64 = 0
    public var expiredOriginals = 0
    public var expiredOriginalBytes: Int64 = 0
    /// Keys removed because they expired, or point at an object that is gone, or are unreadable.
    public var removedKeys = 0
    /// Temp files older than an hour (left by writers that crashed).
    public var removedTempFiles = 0
    /// Objects and originals left, and their bytes.
    public var keptFiles = 0
    public var keptBytes: Int64 = 0
    public var keptKeys = 0
    /// The size limit the sweep worked to (nil: none).
    public var sizeLimit: Int64?
    public var seconds = 0.0
    /// Why part of the sweep could not be done (an object store that did not answer a listing);
    /// nil when it was done whole.
    public var failure: String?

    public init() {}

    public var removedFiles: Int { expiredObjects + trimmedObjects + expiredOriginals }
    public var freedBytes: Int64 { expiredBytes + trimmedBytes + expiredOriginalBytes }

    /// The report as `halcyon sweep --json` prints it and workers log it.
    public var json: JSONValue {
        func n<T: BinaryInteger>(_ v: T) -> JSONValue { .number(Double(v)) }
        return [
            "expired_objects": n(expiredObjects), "expired_bytes": n(expiredBytes),
            "trimmed_objects": n(trimmedObjects), "trimmed_bytes": n(trimmedBytes),
            "expired_originals": n(expiredOriginals), "expired_original_bytes": n(expiredOriginalBytes),
            "removed_keys": n(removedKeys), "removed_temp_files": n(removedTempFiles), "freed_bytes": n(freedBytes),
            "kept_files": n(keptFiles), "kept_bytes": n(keptBytes), "kept_keys": n(keptKeys),
            "size_limit": sizeLimit.map(n) ?? .null, "seconds": .number((seconds * 1000).rounded() / 1000),
            "failure": failure.map { .string($0) } ?? .null,
        ]
    }
}

/// Kingfisher's DiskStorage clean-up, for a content-addressed store shared by many workers:
///
/// 1. Objects and originals whose expiry (mtime) has passed are deleted.
/// 2. If what is left exceeds the size limit, entries are deleted until what is left is at most
///    half the limit (within one entry of it): originals first (downloads, fetched again when
///    needed), then results, each least recently accessed (oldest atime) first.
/// 3. Keys that expired, point at an object that is gone, or cannot be read are deleted.
/// 4. Temp files older than an hour (writers that crashed) are deleted.
///
/// It runs while workers write: each deletion re-checks its reason under the file's lock
/// (`withLockedFile`), and a writer extends an object under the same lock before it writes a
/// key to it, so an object a key written after the sweep started points to is never deleted.
public struct Sweeper: Sendable {
    public let store: DiskStore
    /// Bytes the store may hold; nil for no limit.
    public var sizeLimit: Int64?
    /// Age past which a temp file is debris.
    public var tempFileAge: TimeInterval = 3600

    public init(store: DiskStore, sizeLimit: Int64? = nil) {
        self.store = store
        self.sizeLimit = sizeLimit
    }

    private struct Candidate {
        var path: String
        var bytes: Int64
        var accessed: Date
        var original: Bool
    }

    /// Sweeps once. Raising `cancel` stops it between files (a worker shutting down).
    public func sweep(now: Date = Date(), cancel: CancellationFlag? = nil) -> SweepReport {
        let started = ContinuousClock.now
        let stop = { cancel?.isCancelled == true }
        var report = SweepReport()
        report.sizeLimit = sizeLimit
        var alive: [Candidate] = []

        for (area, original) in [(StoreLayout.Area.objects, false), (.originals, true)] {
            StoreWalker.files(under: store.url(forRelativePath: area.directory).path, depth: area.depth, stop: stop) { path, st in
                let times = FileTimes(st)
                let bytes = Int64(st.st_size)
                if times.expires <= now {
                    if remove(path, if: { FileTimes($0).expires <= now }) {
                        if original {
                            report.expiredOriginals += 1; report.expiredOriginalBytes += bytes
                        } else {
                            report.expiredObjects += 1; report.expiredBytes += bytes
                        }
                        return
                    }
                }
                alive.append(Candidate(path: path, bytes: bytes, accessed: times.accessed, original: original))
            }
        }

        var total = alive.reduce(Int64(0)) { $0 + $1.bytes }
        if let limit = sizeLimit, total > limit {
            let target = limit / 2
            let order = alive.sorted {
                ($0.original ? 0 : 1, $0.accessed.timeIntervalSince1970) < ($1.original ? 0 : 1, $1.accessed.timeIntervalSince1970)
            }
            for c in order where total > target && !stop() {
                // Still untouched since the scan: nobody has used or extended it meanwhile.
                if remove(c.path, if: { FileTimes($0).accessed <= c.accessed }) {
                    report.trimmedObjects += 1
                    report.trimmedBytes += c.bytes
                    total -= c.bytes
                }
            }
        }
        report.keptBytes = total
        report.keptFiles = alive.count - report.trimmedObjects

        StoreWalker.files(under: store.url(forRelativePath: StoreLayout.Area.keys.directory).path, depth: StoreLayout.Area.keys.depth, stop: stop) {
            path, _ in
            let removed = remove(path) { st, fd in
                guard FileTimes(st).expires > now, let text = DiskStore.readSmall(fd), let record = KeyRecord(text) else { return true }
                return access(store.url(forRelativePath: record.object).path, F_OK) != 0
            }
            if removed { report.removedKeys += 1 } else { report.keptKeys += 1 }
        }

        StoreWalker.files(under: store.tmpDirectory.path, depth: 1, stop: stop) { path, st in
            // ctime: the kernel's, not settable — a temp object's mtime is already its expiry.
            if FileTimes.date(st.st_ctim) < now.addingTimeInterval(-tempFileAge), unlink(path) == 0 {
                report.removedTempFiles += 1
            }
        }
        report.seconds = (ContinuousClock.now - started).seconds
        return report
    }

    /// Deletes `path` if `reason` still holds under its lock.
    private func remove(_ path: String, if reason: (stat) -> Bool) -> Bool {
        remove(path) { st, _ in reason(st) }
    }

    private func remove(_ path: String, if reason: (stat, Int32) -> Bool) -> Bool {
        (try? withLockedFile(path) { fd, st -> Bool in
            reason(st, fd) && unlink(path) == 0
        }) == true
    }
}

/// Lists the store's files with `readdir` and `lstat` (Foundation's enumerator is several
/// times slower on 100,000 files).
enum StoreWalker {
    /// Calls `body` for every regular file exactly `depth` directory levels below `directory`,
    /// until `stop` says so.
    static func files(
        under directory: String, depth: Int, stop: () -> Bool = { false },
        _ body: (_ path: String, _ status: stat) -> Void
    ) {
        guard let dir = opendir(directory) else { return }
        defer { closedir(dir) }
        while !stop(), let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name == "." || name == ".." { continue }
            let path = directory + "/" + name
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
            if depth > 1, isDirectory {
                files(under: path, depth: depth - 1, stop: stop, body)
            } else if depth == 1, (st.st_mode & S_IFMT) == S_IFREG {
                body(path, st)
            }
        }
    }
}
