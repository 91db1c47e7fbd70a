import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3

/// The disk sweeper's work for a bucket, by listing (ListObjectsV2, a page of 1,000 at a time)
/// in bounded memory — one page, and for the size limit one histogram of bytes by hour:
///
/// 1. Objects and originals whose expiry (metadata, read by a HEAD each) passed more than
///    `grace` ago are deleted. The grace covers the moment between a writer's 412 and its
///    raising the object's expiry: an object a job is storing onto is never deleted under it.
/// 2. Over the size limit, the least recently written or extended (S3's `LastModified`, which a
///    metadata copy moves) are deleted, oldest hour first, until under half the limit.
/// 3. Keys that expired, or whose object is gone, are deleted (a GET of the key and a HEAD of
///    its object each).
///
/// A sweep costs about one request per object and two per key. Unlike the disk store there is
/// no lock to re-check a reason under: an object a sweep lists as expired and a writer revives in
/// the same second can still be deleted; the writer's key then points at nothing, and the next
/// sweep removes the key (the job that wrote it succeeded; a later job for the key processes the
/// source again).
struct ObjectStoreSweeper {
    let store: ObjectStore
    let sizeLimit: Int64?
    /// How long past its expiry an object stays.
    var grace: TimeInterval = 3600

    var client: S3Client { store.client }

    /// Every entry under `prefix`, page by page, until `stop`.
    private func each(_ prefix: String, stop: () -> Bool, _ body: (S3ListEntry) -> Void) throws(HalcyonError) {
        var token: String?
        repeat {
            let page = try client.list(prefix: prefix, continuationToken: token)
            for entry in page.entries {
                if stop() { return }
                body(entry)
            }
            token = page.nextContinuationToken
        } while token != nil && !stop()
    }

    /// `each`, with a failure to list kept (the first) instead of thrown: the rest goes on. True
    /// when every entry was listed (not stopped, no failure).
    @discardableResult
    private func listing(_ prefix: String, _ failure: inout String?, stop: () -> Bool, _ body: (S3ListEntry) -> Void) -> Bool {
        do {
            try each(prefix, stop: stop, body)
            return !stop()
        } catch {
            failure = failure ?? "listing \(client.location(ofKey: prefix)) failed: \(error.message)"
            return false
        }
    }

    func sweep(now: Date, cancel: CancellationFlag?) -> SweepReport {
        let started = ContinuousClock.now
        let stop = { cancel?.isCancelled == true }
        var report = SweepReport()
        var failure: String?  // apart from `report`, which the listings' bodies change
        report.sizeLimit = sizeLimit
        // Bytes alive by the hour they were last written or extended.
        var byHour: [Int64: Int64] = [:]
        var total: Int64 = 0
        var alive = 0
        for (prefix, original) in [("objects/", false), ("originals/", true)] {
            listing(prefix, &failure, stop: stop) { entry in
                let bytes = Int64(entry.size)
                let info = try? client.head(entry.key)
                let expired = info.map { ObjectStore.times($0.metadata).map { $0.expires.addingTimeInterval(grace) <= now } ?? true } ?? false
                if expired, (try? client.delete(entry.key)) != nil {
                    if original {
                        report.expiredOriginals += 1; report.expiredOriginalBytes += bytes
                    } else {
                        report.expiredObjects += 1; report.expiredBytes += bytes
                    }
                    return
                }
                alive += 1
                total += bytes
                byHour[Self.hour(entry.lastModified), default: 0] += bytes
            }
        }

        if let limit = sizeLimit, total > limit, !stop() {
            // The hours to empty, oldest first, until what is left is under half the limit.
            var cutoff = Int64.min
            var left = total
            for (hour, bytes) in byHour.sorted(by: { $0.key < $1.key }) where left > limit / 2 {
                cutoff = hour
                left -= bytes
            }
            for prefix in ["objects/", "originals/"] {
                listing(prefix, &failure, stop: { stop() || total <= limit / 2 }) { entry in
                    guard Self.hour(entry.lastModified) <= cutoff, (try? client.delete(entry.key)) != nil else { return }
                    report.trimmedObjects += 1
                    report.trimmedBytes += Int64(entry.size)
                    total -= Int64(entry.size)
                }
            }
        }
        report.keptBytes = total
        report.keptFiles = alive - report.trimmedObjects

        listing("keys/", &failure, stop: stop) { entry in
            if keyIsDead(entry.key, now: now), (try? client.delete(entry.key)) != nil {
                report.removedKeys += 1
            } else {
                report.keptKeys += 1
            }
        }
        report.failure = failure
        report.seconds = (ContinuousClock.now - started).seconds
        return report
    }

    /// Whether a key is expired, unreadable, or names an object that is certainly gone. A key
    /// that cannot be read or checked for now (the server not answering) is not dead.
    private func keyIsDead(_ key: String, now: Date) -> Bool {
        let object: S3Object
        do {
            guard let found = try client.get(key, maxBytes: ObjectStore.maxKeyRecordBytes) else { return false }
            object = found
        } catch {
            return error.code == .storeTooLarge
        }
        guard let times = ObjectStore.times(object.info.metadata), times.expires > now,
            let record = KeyRecord(String(decoding: object.data, as: UTF8.self))
        else { return true }
        do {
            return try client.head(record.object) == nil
        } catch {
            return false
        }
    }

    static func hour(_ date: Date?) -> Int64 { Int64((date ?? .distantPast).timeIntervalSince1970 / 3600) }

    /// Reads every object back and compares its SHA-256 with its name. `repair` deletes the
    /// keys naming a corrupt one, then the object (if it still holds the wrong bytes) — in that
    /// order, so no hit names an object that is gone. When not every key could be read, the
    /// corrupt objects are left (and `failure` says so): a key naming one might be missed.
    func verify(repair: Bool) -> VerifyReport {
        let started = ContinuousClock.now
        var report = VerifyReport()
        var failure: String?
        var damaged: [String] = []
        listing("objects/", &failure, stop: { false }) { entry in
            let read: S3Object?
            do {
                read = try client.get(entry.key, maxBytes: ObjectOriginals.maxBytes)
            } catch {
                report.corrupt.append(entry.key)
                return
            }
            guard let object = read else {
                // A sweep removed it after the listing: not corrupt, just no longer there.
                report.vanished += 1
                return
            }
            report.checkedObjects += 1
            report.checkedBytes += Int64(object.data.count)
            guard Digest.sha256Hex(object.data) != Self.digest(named: entry.key) else { return }
            report.corrupt.append(entry.key)
            damaged.append(entry.key)
        }
        if repair, !damaged.isEmpty {
            let names = Set(damaged)
            var unreadable = 0
            let listed = listing("keys/", &failure, stop: { false }) { entry in
                let found: S3Object?
                do throws(HalcyonError) {
                    found = try client.get(entry.key, maxBytes: ObjectStore.maxKeyRecordBytes)
                } catch {
                    if error.code != .storeTooLarge { unreadable += 1 }
                    return
                }
                guard let found, let record = KeyRecord(String(decoding: found.data, as: UTF8.self)), names.contains(record.object) else { return }
                if (try? client.delete(entry.key)) != nil {
                    report.removedKeys += 1
                } else {
                    unreadable += 1
                }
            }
            if listed && unreadable == 0 {
                for key in damaged {
                    // Still the wrong bytes (not deleted and written whole again meanwhile).
                    guard let object = try? client.get(key, maxBytes: ObjectOriginals.maxBytes),
                        Digest.sha256Hex(object.data) != Self.digest(named: key)
                    else { continue }
                    if (try? client.delete(key)) != nil { report.removedObjects += 1 }
                }
            } else {
                failure =
                    failure
                    ?? "\(unreadable) keys could not be read or deleted: the corrupt objects were left in place, so no key names a deleted one"
            }
        }
        report.failure = failure
        report.seconds = (ContinuousClock.now - started).seconds
        return report
    }

    /// The digest an object's name says it has: `objects/ab/cd/<digest>.<ext>`.
    static func digest(named key: String) -> String {
        let name = key.split(separator: "/").last.map(String.init) ?? ""
        return String(name.prefix { $0 != "." })
    }
}
