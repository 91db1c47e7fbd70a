import Foundation
import HalcyonRuntime

/// What `halcyon verify` found.
public struct VerifyReport: Sendable, Equatable {
    public var checkedObjects = 0
    public var checkedBytes: Int64 = 0
    /// Objects whose bytes no longer hash to their name (relative paths).
    public var corrupt: [String] = []
    /// Objects listed but removed (by a concurrent sweep) before they were read: not checked.
    public var vanished = 0
    /// With repair: corrupt objects removed, and the keys that pointed at them.
    public var removedObjects = 0
    public var removedKeys = 0
    public var seconds = 0.0
    /// Why not every object could be listed (an object store that did not answer); nil when
    /// the listing was whole.
    public var failure: String?

    public init() {}
}

/// Re-hashes every object and compares it with its name; with `repair`, removes the corrupt
/// ones and their keys, so the next job for them processes afresh instead of serving bad bytes.
/// Reads with `O_NOATIME` where allowed: verifying is not an access.
public struct Verifier: Sendable {
    public let store: DiskStore

    public init(store: DiskStore) {
        self.store = store
    }

    /// `beforeRead` runs between finding an object and reading it (tests use it to remove one,
    /// as a concurrent sweep can).
    public func verify(repair: Bool, beforeRead: (String) -> Void = { _ in }) -> VerifyReport {
        let started = ContinuousClock.now
        var report = VerifyReport()
        let area = StoreLayout.Area.objects
        let objects = store.url(forRelativePath: area.directory).path
        StoreWalker.files(under: objects, depth: area.depth) { path, st in
            report.checkedObjects += 1
            report.checkedBytes += Int64(st.st_size)
            let expected = StoreLayout.digest(ofObjectPath: path)
            beforeRead(path)
            switch Self.read(path) {
            case .gone:
                // A sweep removed it after the listing: not corrupt, just no longer there.
                report.checkedObjects -= 1
                report.checkedBytes -= Int64(st.st_size)
                report.vanished += 1
            case .data(let data) where Digest.sha256Hex(data) == expected:
                break
            default:
                report.corrupt.append(area.prefix + path.dropFirst(objects.count + 1))
            }
        }
        if repair, !report.corrupt.isEmpty {
            var removed: Set<String> = []
            for relative in report.corrupt {
                let path = store.url(forRelativePath: relative).path
                // Under its lock, and only if it is still the bad file (not rewritten meanwhile).
                if (try? withLockedFile(path) { fd, _ -> Bool in
                    readWhole(fd).map { Digest.sha256Hex($0) != StoreLayout.digest(ofObjectPath: relative) } == true
                        && unlink(path) == 0
                }) == true {
                    report.removedObjects += 1
                    removed.insert(relative)
                }
            }
            // The keys naming a removed object (a lookup misses them anyway: it finds no object).
            StoreWalker.files(under: store.url(forRelativePath: StoreLayout.Area.keys.directory).path, depth: StoreLayout.Area.keys.depth) {
                path, _ in
                if (try? withLockedFile(path) { fd, _ -> Bool in
                    guard let text = DiskStore.readSmall(fd), let record = KeyRecord(text) else { return false }
                    return removed.contains(record.object) && unlink(path) == 0
                }) == true {
                    report.removedKeys += 1
                }
            }
        }
        report.seconds = (ContinuousClock.now - started).seconds
        return report
    }

    enum Read { case data(Data), gone, unreadable }

    static func read(_ path: String) -> Read {
        let fd = openForReading(path)
        guard fd >= 0 else { return errno == ENOENT ? .gone : .unreadable }
        defer { close(fd) }
        return readWhole(fd).map { .data($0) } ?? .unreadable
    }
}
