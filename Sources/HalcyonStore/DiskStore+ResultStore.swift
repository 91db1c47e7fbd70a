import Foundation
import HalcyonDomain
import HalcyonRuntime

extension DiskStore: ResultStore {
    public func checkAccess() throws(HalcyonError) {
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

    public var location: String { root.path }

    public var originals: any OriginalsCache { OriginalsStore(storeRoot: root) }

    public func sweep(sizeLimit: Int64?, now: Date, cancel: CancellationFlag?) -> SweepReport {
        Sweeper(store: self, sizeLimit: sizeLimit).sweep(now: now, cancel: cancel)
    }

    public func verify(repair: Bool) -> VerifyReport {
        Verifier(store: self).verify(repair: repair)
    }
}
