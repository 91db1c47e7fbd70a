import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonS3

/// The disk sweeper's work for a bucket, by listing (ListObjectsV2, a page of 1,000 at a time),
/// in memory bounded by one page, a count of bytes per hour, and — over the size limit — the
/// entries of the one hour the trim stops in:
///
/// 1. Objects and originals whose expiry (metadata, read by a HEAD each) passed more than
///    `grace` ago are deleted. The grace covers the moment between a writer's 412 and its
///    raising the object's expiry: an object a job is storing onto is never deleted under it.
/// 2. Over the size limit, a trim is planned: the least recently written or extended first
///    (S3's `LastModified`, which a metadata copy moves), originals (downloads, fetched again
///    when needed) before results, until what is left is at most half the limit — within one
///    entry of it. Whole hours come from the counts; the hour the trim stops in is listed again
///    and ordered entry by entry. The originals it names are deleted at once: no key names one.
/// 3. Keys that expired, whose object is gone, or whose object the trim is to delete are
///    deleted (a GET of the key and a HEAD of its object each) — before those objects, so no key
///    is left naming a trimmed object.
/// 4. The results the trim names are deleted (one more listing), each only if its
///    `LastModified` is still the one planned with: one a hit extended meanwhile stays. When
///    the keys could not all be checked, the results are left for the next sweep.
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

    /// What a trim deletes of one kind of entry (results or originals): every entry last
    /// modified before `before` (Unix seconds), and those of `chosen` (key → last modification)
    /// still last modified then.
    struct TrimPlan {
        var before = Int64.min
        var chosen: [String: Int64] = [:]

        var isEmpty: Bool { before == .min && chosen.isEmpty }

        /// Whether the entry at `key`, last modified at `modified` (a listing's date), goes.
        func deletes(_ key: String, modified: Int64) -> Bool {
            modified < before || chosen[key] == modified
        }

        /// Whether a key naming the object at `key`, last modified at `modified` as a HEAD read
        /// it, goes before the object: with a second's slack, as a HEAD's date and a listing's
        /// may round differently (deleting a key costs a miss, leaving one a hit on nothing).
        func deletesKey(naming key: String, modified: Int64) -> Bool {
            !isEmpty && (modified <= before || chosen[key] != nil)
        }
    }

    /// Every entry under `prefix`, page by page, until `stop`.
    private func each(_ prefix: String, stop: () -> Bool, _ body: (S3ListEntry) async -> Void) async throws(HalcyonError) {
        var token: String?
        repeat {
            let page = try await client.list(prefix: prefix, continuationToken: token)
            for entry in page.entries {
                if stop() { return }
                await body(entry)
            }
            token = page.nextContinuationToken
        } while token != nil && !stop()
    }

    /// `each`, with a failure to list kept (the first) instead of thrown: the rest goes on. True
    /// when every entry was listed (not stopped, no failure).
    @discardableResult
    private func listing(_ prefix: String, _ failure: inout String?, stop: () -> Bool, _ body: (S3ListEntry) async -> Void) async -> Bool {
        do {
            try await each(prefix, stop: stop, body)
            return !stop()
        } catch {
            failure = failure ?? "listing \(client.location(ofKey: prefix)) failed: \(error.message)"
            return false
        }
    }

    /// Whole Unix seconds of a listing's or a HEAD's date (none: the oldest there is).
    static func seconds(_ date: Date?) -> Int64 { ObjectStore.seconds(date ?? .distantPast) }

    static func hour(_ seconds: Int64) -> Int64 { seconds >= 0 ? seconds / 3600 : (seconds - 3599) / 3600 }

    func sweep(now: Date, cancel: CancellationFlag?) async -> SweepReport {
        let started = ContinuousClock.now
        let stop = { cancel?.isCancelled == true }
        var report = SweepReport()
        var failure: String?  // apart from `report`, which the listings' bodies change
        report.sizeLimit = sizeLimit
        // Bytes alive, results' and originals', by the hour they were last written or extended.
        var resultHours: [Int64: Int64] = [:], originalHours: [Int64: Int64] = [:]
        var resultBytes: Int64 = 0, originalBytes: Int64 = 0
        var alive = 0
        for (prefix, original) in [(StoreLayout.Area.objects.prefix, false), (StoreLayout.Area.originals.prefix, true)] {
            await listing(prefix, &failure, stop: stop) { entry in
                let bytes = Int64(entry.size)
                let info = try? await client.head(entry.key)
                let expired = info.map { ObjectStore.times($0.metadata).map { $0.expires.addingTimeInterval(grace) <= now } ?? true } ?? false
                if expired, (try? await client.delete(entry.key)) != nil {
                    if original {
                        report.expiredOriginals += 1; report.expiredOriginalBytes += bytes
                    } else {
                        report.expiredObjects += 1; report.expiredBytes += bytes
                    }
                    return
                }
                alive += 1
                let hour = Self.hour(Self.seconds(entry.lastModified))
                if original {
                    originalBytes += bytes
                    originalHours[hour, default: 0] += bytes
                } else {
                    resultBytes += bytes
                    resultHours[hour, default: 0] += bytes
                }
            }
        }
        var total = resultBytes + originalBytes

        var results = TrimPlan()
        if let limit = sizeLimit, total > limit, !stop() {
            let need = total - limit / 2
            let originals = await plan(
                StoreLayout.Area.originals.prefix, need: min(need, originalBytes), byHour: originalHours, &failure, stop: stop)
            results = await plan(StoreLayout.Area.objects.prefix, need: need - originalBytes, byHour: resultHours, &failure, stop: stop)
            if !originals.isEmpty { await trim(StoreLayout.Area.originals.prefix, originals, &report, &total, &failure, stop: stop) }
        }

        var unreadableKeys = 0
        let keysChecked = await listing(StoreLayout.Area.keys.prefix, &failure, stop: stop) { entry in
            switch await check(key: entry.key, now: now, trimming: results) {
            case .alive: report.keptKeys += 1
            case .dead where (try? await client.delete(entry.key)) != nil: report.removedKeys += 1
            case .dead, .unknown:
                // Not known to name no trimmed object: the results' trim waits.
                unreadableKeys += 1
                report.keptKeys += 1
            }
        }
        if !results.isEmpty {
            if keysChecked && unreadableKeys == 0 {
                await trim(StoreLayout.Area.objects.prefix, results, &report, &total, &failure, stop: stop)
            } else if !stop() {
                failure =
                    failure ?? "\(unreadableKeys) keys could not be read or deleted: results over the size limit are left for the next sweep"
            }
        }
        report.keptBytes = total
        report.keptFiles = alive - report.trimmedObjects
        report.failure = failure
        report.seconds = (ContinuousClock.now - started).seconds
        return report
    }

    /// The plan that deletes at least `need` bytes of the entries under `prefix`, least recently
    /// modified first: the hours before the one in which the count by hour reaches `need`, then
    /// that hour's entries, listed and ordered by their last modification, until it is reached.
    private func plan(_ prefix: String, need: Int64, byHour: [Int64: Int64], _ failure: inout String?, stop: () -> Bool) async -> TrimPlan {
        var plan = TrimPlan()
        let hours = byHour.sorted { $0.key < $1.key }
        guard need > 0, let newest = hours.last?.key else { return plan }
        // The hour the count reaches `need` in (the newest, if the count changed under us).
        var earlier: Int64 = 0
        var last = newest
        for (hour, bytes) in hours where hour != newest {
            if earlier + bytes >= need {
                last = hour
                break
            }
            earlier += bytes
        }
        plan.before = last * 3600
        var inHour: [(key: String, bytes: Int64, modified: Int64)] = []
        await listing(prefix, &failure, stop: stop) { entry in
            let modified = Self.seconds(entry.lastModified)
            if Self.hour(modified) == last { inHour.append((entry.key, Int64(entry.size), modified)) }
        }
        var left = need - earlier
        for entry in inHour.sorted(by: { ($0.modified, $0.key) < ($1.modified, $1.key) }) where left > 0 {
            plan.chosen[entry.key] = entry.modified
            left -= entry.bytes
        }
        return plan
    }

    /// Deletes what `plan` names under `prefix`, counted as trimmed.
    private func trim(
        _ prefix: String, _ plan: TrimPlan, _ report: inout SweepReport, _ total: inout Int64, _ failure: inout String?, stop: () -> Bool
    ) async {
        await listing(prefix, &failure, stop: stop) { entry in
            guard plan.deletes(entry.key, modified: Self.seconds(entry.lastModified)), (try? await client.delete(entry.key)) != nil else { return }
            report.trimmedObjects += 1
            report.trimmedBytes += Int64(entry.size)
            total -= Int64(entry.size)
        }
    }

    private enum KeyState { case alive, dead, unknown }

    /// Whether a key is expired, unreadable, names an object that is certainly gone, or names
    /// one `trimming` is to delete. A key that cannot be read or checked for now (the server not
    /// answering) is `unknown`.
    private func check(key: String, now: Date, trimming plan: TrimPlan) async -> KeyState {
        let object: S3Object
        do {
            guard let found = try await client.get(key, maxBytes: ObjectStore.maxKeyRecordBytes) else { return .alive }
            object = found
        } catch {
            return error.code == .storeTooLarge ? .dead : .unknown
        }
        guard let times = ObjectStore.times(object.info.metadata), times.expires > now,
            let record = KeyRecord(String(decoding: object.data, as: UTF8.self))
        else { return .dead }
        do {
            guard let info = try await client.head(record.object) else { return .dead }
            return plan.deletesKey(naming: record.object, modified: Self.seconds(info.lastModified)) ? .dead : .alive
        } catch {
            return .unknown
        }
    }

    /// Reads every object back and compares its SHA-256 with its name. `repair` deletes the
    /// keys naming a corrupt one, then the object (if it still holds the wrong bytes) — in that
    /// order, so no hit names an object that is gone. When not every key could be read, the
    /// corrupt objects are left (and `failure` says so): a key naming one might be missed.
    func verify(repair: Bool) async -> VerifyReport {
        let started = ContinuousClock.now
        var report = VerifyReport()
        var failure: String?
        var damaged: [String] = []
        await listing(StoreLayout.Area.objects.prefix, &failure, stop: { false }) { entry in
            let read: S3Object?
            do {
                read = try await client.get(entry.key, maxBytes: ObjectOriginals.maxBytes)
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
            guard Digest.sha256Hex(object.data) != StoreLayout.digest(ofObjectPath: entry.key) else { return }
            report.corrupt.append(entry.key)
            damaged.append(entry.key)
        }
        if repair, !damaged.isEmpty {
            let names = Set(damaged)
            var unreadable = 0
            let listed = await listing(StoreLayout.Area.keys.prefix, &failure, stop: { false }) { entry in
                let found: S3Object?
                do throws(HalcyonError) {
                    found = try await client.get(entry.key, maxBytes: ObjectStore.maxKeyRecordBytes)
                } catch {
                    if error.code != .storeTooLarge { unreadable += 1 }
                    return
                }
                guard let found, let record = KeyRecord(String(decoding: found.data, as: UTF8.self)), names.contains(record.object) else { return }
                if (try? await client.delete(entry.key)) != nil {
                    report.removedKeys += 1
                } else {
                    unreadable += 1
                }
            }
            if listed && unreadable == 0 {
                for key in damaged {
                    // Still the wrong bytes (not deleted and written whole again meanwhile).
                    guard let object = try? await client.get(key, maxBytes: ObjectOriginals.maxBytes),
                        Digest.sha256Hex(object.data) != StoreLayout.digest(ofObjectPath: key)
                    else { continue }
                    if (try? await client.delete(key)) != nil { report.removedObjects += 1 }
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
}
