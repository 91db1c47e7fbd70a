import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonTestSupport
import Testing

/// `halcyon.similar_images` (migration 0025) against a brute-force scan computed here: the same
/// jobs at every distance, on the index; bad arguments are refused naming the argument.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL)"))
struct SimilarImagesTests {
    /// A hash of 64 random hex digits, and a copy of it with `bits` distinct bits flipped.
    static func random(_ rng: inout some RandomNumberGenerator) -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) } }
    static func flipped(_ hash: [UInt8], _ bits: Int, _ rng: inout some RandomNumberGenerator) -> [UInt8] {
        var out = hash
        for bit in (0..<256).shuffled(using: &rng).prefix(bits) { out[bit / 8] ^= 1 << (bit % 8) }
        return out
    }
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func lookupsAreTheBruteForceScanAtEveryDistance() async throws {
        let db = try await TestDatabase.create()
        var rng = FuzzRandom(seed: 59)
        // 1,500 pictures, each with copies at distances 0–60 (near-duplicates clustered as real
        // uploads are), 16,500 rows.
        var hashes: [String] = []
        var originals: [[UInt8]] = []
        for _ in 0..<1500 {
            let original = Self.random(&rng)
            originals.append(original)
            hashes.append(Self.hex(original))
            for bits in [1, 3, 8, 15, 16, 24, 31, 32, 40, 47] { hashes.append(Self.hex(Self.flipped(original, bits, &rng))) }
        }
        let text = "{" + hashes.joined(separator: ",") + "}"
        try await db.query(
            """
            INSERT INTO halcyon.jobs (source, source_pdq, source_pdq_quality)
            SELECT 'https://example.com/' || n || '.jpg', h, 90 FROM unnest($1::text[]) WITH ORDINALITY AS t(h, n)
            """, [text])
        try await db.query("ANALYZE halcyon.jobs")
        let ids = try await db.query("SELECT source_pdq FROM halcyon.jobs ORDER BY id").rows.compactMap { $0[0] }
        #expect(ids.count == hashes.count)
        for q in 0..<12 {
            // Queries: an original itself, or a copy of one 0–20 bits off it.
            let query = Self.hex(Self.flipped(originals[q * 97], q * 2 % 21, &rng))
            for distance in [0, 8, 15, 16, 31, 32, 47, 48, 64] {
                let expected = hashes.enumerated().compactMap { (i, h) -> String? in
                    guard let d = PerceptualHash.distance(h, query), d <= distance else { return nil }
                    return "\(i + 1):\(d)"
                }.sorted()
                let rows = try await db.query(
                    "SELECT job_id, distance FROM halcyon.similar_images($1, $2::int) ORDER BY job_id", [query.uppercased(), String(distance)])
                let found = rows.rows.map { "\($0[0] ?? ""):\($0[1] ?? "")" }.sorted()
                #expect(found == expected, "query \(q), distance \(distance): \(found.count) found, \(expected.count) expected")
                // Nearest first.
                let ordered = try await db.query("SELECT distance FROM halcyon.similar_images($1, $2::int)", [query, String(distance)])
                let d = ordered.rows.compactMap { $0[0].flatMap(Int.init) }
                #expect(d == d.sorted())
            }
        }
        // The SQL distance is this one.
        let pairs = try await db.query(
            "SELECT a.source_pdq, b.source_pdq, halcyon.pdq_distance(a.source_pdq, b.source_pdq) FROM halcyon.jobs a, halcyon.jobs b WHERE a.id <= 40 AND b.id <= 40"
        )
        for r in pairs.rows { #expect(PerceptualHash.distance(r[0] ?? "", r[1] ?? "").map(String.init) == r[2]) }

        // The lookup reads the index, not the table (as the function plans it: seq scans off).
        let c = try await db.connect()
        defer { Task { await c.close() } }
        _ = try await c.execute("SET enable_seqscan = off")
        let plan = try await c.execute(
            """
            EXPLAIN SELECT id FROM halcyon.jobs j WHERE j.source_pdq IS NOT NULL
              AND halcyon.pdq_chunks(j.source_pdq) && halcyon.pdq_probe($1, 1)
              AND halcyon.pdq_distance(j.source_pdq, $1) <= 31
            """, [hashes[0]])
        let text2 = plan.rows.compactMap { $0[0] }.joined(separator: "\n")
        #expect(text2.contains("jobs_source_pdq_idx"), "\(text2)")

        for (hash, distance) in [("abc", "31"), (String(repeating: "g", count: 64), "31"), (hashes[0], "-1"), (hashes[0], "257")] {
            await #expect(throws: (any Error).self, "\(hash.prefix(8)) \(distance)") {
                try await db.query("SELECT * FROM halcyon.similar_images($1, $2::int)", [hash, distance])
            }
        }
        // A job's own hash is refused by the table when malformed.
        await #expect(throws: (any Error).self) {
            try await db.query("INSERT INTO halcyon.jobs (source, source_pdq) VALUES ('https://example.com/x.jpg', 'ABC')")
        }
    }
}
