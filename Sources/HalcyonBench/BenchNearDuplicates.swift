import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonSamples

/// N: near-duplicate lookups (`halcyon.similar_images`) at a million recorded perceptual hashes.
extension Bench {
    /// Recorded hashes N writes (× --scale, at least 10,000).
    static let nearDuplicateRows = 1_000_000
    /// Copies of each original among them (the first is the original itself).
    static let copiesPerOriginal = 10

    /// N: `rows` hashes as jobs that recorded them — one original in ten, each with nine copies
    /// 1–30 bits away (what re-encoding, resizing, a caption move a PDQ hash by) — then lookups
    /// through the queue's own API, as an application asks before processing an upload: new
    /// copies of recorded originals (1–30 bits from them) and unrelated hashes, 3 to 1. p50/p99
    /// at 15, 31 and 47 bits; at 31, each answer of a sample against a scan of every row.
    func runNearDuplicates(conninfo: String) async throws -> NearDuplicateRun {
        let c = try await PGConnection.connect(conninfo, label: "bench-near-duplicates")
        defer { Task { await c.close() } }
        try await Self.ensureOnlyBenchJobs(c)
        try await c.run(BenchSQL.DeleteHashes())
        do {
            let run = try await measureNearDuplicates(c)
            try await c.run(BenchSQL.DeleteHashes())
            try await c.run(BenchSQL.VacuumAnalyzeJobs())
            return run
        } catch {
            // A million rows are not left behind for the next scenario.
            _ = try? await c.run(BenchSQL.DeleteHashes())
            throw error
        }
    }

    private func measureNearDuplicates(_ c: PGConnection) async throws -> NearDuplicateRun {
        let rows = max(10_000, Int(Double(Self.nearDuplicateRows) * scale))
        var random = SplitMix(seed: 59)
        var originals: [[UInt8]] = []
        print("N: writing \(rows) perceptual hashes…")
        let filling = ContinuousClock.now
        let batch = 20_000
        var written = 0
        while written < rows {
            var hashes: [String] = []
            hashes.reserveCapacity(batch)
            for n in written..<min(rows, written + batch) {
                if n % Self.copiesPerOriginal == 0 {
                    originals.append(random.bytes(32))
                    hashes.append(Digest.hex(originals[originals.count - 1]))
                } else {
                    hashes.append(Digest.hex(random.flipping(originals[originals.count - 1], bits: 1 + random.below(30))))
                }
            }
            try await c.run(BenchSQL.InsertHashes(hashes: hashes, first: written))
            written += hashes.count
        }
        try await c.run(BenchSQL.VacuumAnalyzeJobs())
        let fill = (ContinuousClock.now - filling).seconds
        print("N: \(rows) hashes written and vacuumed in \(TimeSpan.format(fill)); lookups…")

        // An application's lookups: three in four a new copy of a recorded original.
        func query() -> String {
            if random.below(4) == 3 { return Digest.hex(random.bytes(32)) }
            return Digest.hex(random.flipping(originals[random.below(originals.count)], bits: 1 + random.below(30)))
        }
        let queue = JobQueue(connection: c)
        var run = NearDuplicateRun(rows: rows, originals: originals.count, fillSeconds: fill)
        for (distance, count) in [(15, 200), (31, 500), (47, 30)] {
            var ms: [Double] = [], found = 0
            for _ in 0..<count {
                let hash = query()
                let start = ContinuousClock.now
                found += try await queue.similarImages(hash: hash, maxDistance: distance, limit: 10_000).count
                ms.append((ContinuousClock.now - start).seconds * 1000)
            }
            run.lookups.append(.init(distance: distance, milliseconds: ms, found: Double(found) / Double(count)))
        }
        // Recall: the index's answers against a scan of every row, on a sample.
        var expected = 0, returned = 0, scanMs: [Double] = []
        for _ in 0..<20 {
            let hash = query()
            let start = ContinuousClock.now
            let scanned = Set(try await c.rows(BenchSQL.ScanHashes(hash: hash, maxDistance: 31)).map(\.id))
            scanMs.append((ContinuousClock.now - start).seconds * 1000)
            let indexed = Set(try await queue.similarImages(hash: hash, maxDistance: 31, limit: 10_000).map(\.jobID))
            expected += scanned.count
            returned += scanned.intersection(indexed).count
            guard indexed.isSubset(of: scanned) else { throw CommandFailure("N: the index returned a job the scan says is beyond 31 bits") }
        }
        run.recall = expected == 0 ? 1 : Double(returned) / Double(expected)
        run.recallQueries = 20
        run.scanMilliseconds = scanMs
        print("N: " + run.line)
        return run
    }
}

/// N's draws: the bench's seeded generator, so its hashes are the same every run.
extension SplitMix {
    /// 0 ..< n.
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }

    /// `bytes` with `bits` distinct bits flipped.
    mutating func flipping(_ bytes: [UInt8], bits: Int) -> [UInt8] {
        var out = bytes, flipped = Set<Int>()
        while flipped.count < min(bits, bytes.count * 8) {
            let bit = below(bytes.count * 8)
            if flipped.insert(bit).inserted { out[bit / 8] ^= 1 << (bit % 8) }
        }
        return out
    }
}

/// N's measurements.
struct NearDuplicateRun {
    struct Lookup {
        var distance: Int
        var milliseconds: [Double]
        /// Mean jobs found per lookup.
        var found: Double
    }

    var rows: Int
    var originals: Int
    var fillSeconds: Double
    var lookups: [Lookup] = []
    /// Of the jobs a scan finds within 31 bits, the share the index's lookup returned.
    var recall: Double = 0
    var recallQueries = 0
    var scanMilliseconds: [Double] = []

    var line: String {
        lookups.map {
            String(format: "%d bits p50 %.1f ms, p99 %.1f ms", $0.distance, percentile($0.milliseconds, 50), percentile($0.milliseconds, 99))
        }
        .joined(separator: "; ") + String(format: "; recall at 31 bits %.3f (%d lookups against a scan)", recall, recallQueries)
    }

    var summary: String {
        var out =
            "N — near-duplicate lookups (halcyon.similar_images) at \(rows) recorded hashes (\(originals) originals × \(Bench.copiesPerOriginal)):\n"
        out += "  max distance   lookups   p50 ms   p99 ms   jobs found (mean)\n"
        for l in lookups {
            out += String(
                format: "  %-12d   %7d   %6.1f   %6.1f   %.1f\n", l.distance, l.milliseconds.count, percentile(l.milliseconds, 50),
                percentile(l.milliseconds, 99), l.found)
        }
        out += String(
            format: "  recall at 31 bits against a scan of every row: %.3f (%d lookups; the scan p50 %.0f ms)\n", recall, recallQueries,
            percentile(scanMilliseconds, 50))
        out += String(format: "  hashes written and vacuumed in %.0f s\n", fillSeconds)
        return out
    }

    var json: JSONValue {
        func rounded(_ v: Double, _ places: Double) -> JSONValue { .number((v * places).rounded() / places) }
        let lookups: [JSONValue] = lookups.map { l in
            let o: [String: JSONValue] = [
                "max_distance": .number(Double(l.distance)), "lookups": .number(Double(l.milliseconds.count)),
                "p50_ms": rounded(percentile(l.milliseconds, 50), 100), "p99_ms": rounded(percentile(l.milliseconds, 99), 100),
                "found_mean": rounded(l.found, 10),
            ]
            return .object(o)
        }
        let o: [String: JSONValue] = [
            "rows": .number(Double(rows)), "originals": .number(Double(originals)), "fill_seconds": rounded(fillSeconds, 1),
            "recall": rounded(recall, 1000), "recall_lookups": .number(Double(recallQueries)),
            "scan_p50_ms": rounded(percentile(scanMilliseconds, 50), 10), "lookups": .array(lookups),
        ]
        return .object(o)
    }
}
