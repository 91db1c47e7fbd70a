import Foundation
import HalcyonDomain
import HalcyonRuntime

extension DiskStore: ResultStore {
    public var location: String { root.path }

    public var originals: any OriginalsCache { OriginalsStore(storeRoot: root) }

    public func sweep(sizeLimit: Int64?, now: Date, cancel: CancellationFlag?) -> SweepReport {
        Sweeper(store: self, sizeLimit: sizeLimit).sweep(now: now, cancel: cancel)
    }

    public func verify(repair: Bool) -> VerifyReport {
        Verifier(store: self).verify(repair: repair)
    }
}
