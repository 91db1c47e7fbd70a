import Foundation
import HalcyonDomain
import HalcyonRuntime

extension DiskStore: ResultStore {
    /// Stores a job's result (`storeBlocking`, on an I/O thread): the object, its expiry raised to
    /// this key's if later, then the key's file pointing at it.
    public func store(
        _ data: Data, ext: String, info: ResultInfo, key: String, expiration: StorageExpiration, now: Date = Date()
    ) async throws(HalcyonError) -> StoredObject {
        try await onIOThread { () throws(HalcyonError) -> StoredObject in
            try storeBlocking(data, ext: ext, info: info, key: key, expiration: expiration, now: now)
        }
    }

    /// Looks `key` up (`lookupBlocking`, on an I/O thread).
    public func lookup(_ key: String, extend: ExpirationExtending, now: Date = Date()) async -> CachedResult? {
        await onIOThread { lookupBlocking(key, extend: extend, now: now) }
    }

    /// One after another on one I/O thread (a file read each: cheaper than a hand-off each).
    public func lookup(_ keys: [(key: String, extend: ExpirationExtending)], now: Date) async -> [String: CachedResult] {
        await onIOThread {
            var found: [String: CachedResult] = [:], seen: Set<String> = []
            for (key, extend) in keys where seen.insert(key).inserted { found[key] = lookupBlocking(key, extend: extend, now: now) }
            return found
        }
    }

    public func checkAccess() async throws(HalcyonError) {
        try await onIOThread { () throws(HalcyonError) in
            let tmp = tmpDirectory
            do {
                try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
            } catch {
                throw HalcyonError(.writeFailed, "cannot make the store's directory \(tmp.path): \(error.localizedDescription)", permanent: true)
            }
            let probe = tmp.appendingPathComponent("access-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            let fd = open(probe.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw HalcyonError(.writeFailed, "cannot write in the store \(root.path): \(String(cString: strerror(errno)))", permanent: true)
            }
            close(fd)
            unlink(probe.path)
        }
    }

    /// `statvfs` of the root, on an I/O thread; nil when it cannot be read.
    public func space() async -> StoreSpace? {
        await onIOThread { () -> StoreSpace? in
            var s = statvfs()
            guard statvfs(rootPath, &s) == 0 else { return nil }
            let unit = Int64(s.f_frsize)
            return StoreSpace(freeBytes: Int64(s.f_bavail) * unit, totalBytes: Int64(s.f_blocks) * unit)
        }
    }

    /// Bytes a probe writes: one page, enough to need a block of its own.
    static let probeBytes = 4096

    /// Writes `probeBytes` to a new file in `tmp/`, fsyncs it and removes it, on an I/O thread.
    public func probeWrite() async throws(HalcyonError) {
        try await onIOThread { () throws(HalcyonError) in
            let tmp = tmpDirectory
            try AtomicFile.makeDirectories(tmp) { (_: URL) throws(HalcyonError) in }
            let probe = tmp.appendingPathComponent("probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            let fd = open(probe.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw storeWriteError(errno, "cannot create a probe file in \(tmp.path)") }
            defer { unlink(probe.path) }
            let bytes = [UInt8](repeating: 0x5A, count: Self.probeBytes)
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
            let failure = written == bytes.count ? (fsync(fd) == 0 ? 0 : errno) : (written < 0 ? errno : ENOSPC)
            close(fd)
            if failure != 0 { throw storeWriteError(failure, "a probe's write of \(Self.probeBytes) bytes in \(tmp.path) failed") }
        }
    }

    public var location: String { root.path }

    public var originals: any OriginalsCache { OriginalsStore(storeRoot: root) }

    /// `Sweeper`'s sweep, on an I/O thread.
    public func sweep(sizeLimit: Int64?, now: Date, cancel: CancellationFlag?) async -> SweepReport {
        await onIOThread { Sweeper(store: self, sizeLimit: sizeLimit).sweep(now: now, cancel: cancel) }
    }

    /// `Verifier`'s check, on an I/O thread.
    public func verify(repair: Bool) async -> VerifyReport {
        await onIOThread { Verifier(store: self).verify(repair: repair) }
    }
}
