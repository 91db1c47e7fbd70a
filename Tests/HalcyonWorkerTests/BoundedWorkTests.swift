import Foundation
import HalcyonEmbedded
import HalcyonQueue
import HalcyonSamples
import HalcyonTestSupport
import Testing

/// Work that a small job can ask for is bounded: a still output decodes one page of a
/// multi-page file. Each case drains one worker and reads the peak RSS it reports on exit.
// Their workers keep both cores busy for seconds: each test takes two process slots.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, origin, binary)"), .processes(2))
struct BoundedWorkTests {
    static func hostileFixture(_ name: String) throws -> Data {
        try Data(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/hostile").appendingPathComponent(name))
    }

    /// Drains the jobs already in `db` with one worker; returns its peak RSS in MB (from the
    /// "worker stopped" line) and its output.
    static func drain(_ db: TestDatabase, _ extra: [String] = []) async throws -> (peakMB: Int, output: String) {
        let w = try HalcyonProcess(
            [
                "work", "--drain", "--no-progress", "--store", try TestEnvironment.temporaryDirectory("store").path,
                "--allow-network", "127.0.0.1/32", "--fetch-retries", "0",
            ] + extra, conninfo: db.conninfo)
        // The fax's resize is 0.4 s in a release build and ~15 s of CPU in the suite's debug build
        // (the resampler's loops unoptimised); under the whole suite's load that is minutes.
        let status = await w.wait(timeout: 300)
        #expect(status == 0, "\(w.output.suffix(2000))")
        let line = w.output.split(separator: "\n").last { $0.contains("worker stopped") } ?? ""
        let peak = line.firstRange(of: "peak_rss_mb=").map { line[$0.upperBound...].prefix { $0.isNumber } }.flatMap { Int($0) }
        return (peak ?? -1, w.output)
    }

    /// A 3,275-byte, three-page CCITT G4 TIFF of 3307×4677 pages (a scanned A4 fax) made into a
    /// 128-pixel thumbnail: one page is decoded (each is 15.5 MP, 124 MB at 16 bits per
    /// sample), and its gray pixels are converted to sRGB after the resize, not before.
    @Test func aMultiPageFaxDecodesOnlyThePageItUses() async throws {
        let url = try Origin.publish("bounded-fax3.tif", try Self.hostileFixture("fax3-g4.tif"))
        let db = try await TestDatabase.create()
        let id = try await db.query(
            "SELECT halcyon.enqueue($1, processors => 'resize(128x128, mode=fit) |> format(png)', max_attempts => 1) AS id", [url]
        ).value(0, "id")!
        let (peak, output) = try await Self.drain(db)
        let row = try await db.query(
            "SELECT state::text, last_error, result_width, result_height FROM halcyon.jobs WHERE id = $1::bigint", [id])
        #expect(row.value(0, "state") == "succeeded", "\(row.value(0, "last_error") ?? "")")
        #expect(row.value(0, "result_width") == "91" && row.value(0, "result_height") == "128")
        print("3-page G4 fax to a thumbnail: worker peak RSS \(peak) MB")
        #expect(peak > 0 && peak < 250, "peak RSS \(peak) MB: \(output.suffix(500))")
    }

    /// Thirteen watermark steps over four 9 KB PNGs of 4000×4000 (16 MP each): each draw decodes
    /// its mark inside the job's processing and lets it go, so the job holds one mark at a time
    /// (before: every mark held decoded for the whole job, 1.1 GB). Thirteen distinct marks are
    /// refused from the chain.
    @Test func watermarksAreDecodedPerDrawWithinTheBudget() async throws {
        var marks: [String] = []
        for (i, colour) in [(250, 0, 0), (0, 250, 0), (0, 0, 250), (250, 250, 0)].enumerated() {
            let png = try SampleImages.solid(width: 4000, height: 4000, red: UInt8(colour.0), green: UInt8(colour.1), blue: UInt8(colour.2))
            marks.append(try Origin.publish("bounded-mark-\(i).png", png))
        }
        let photo = try Origin.publish("bounded-photo.jpg", try SampleImages.photo(width: 1200, height: 800, seed: 5))
        let db = try await TestDatabase.create()
        let thirteen = (0..<13).map {
            #"watermark("\#(marks[$0 % 4])", scale=0.1, opacity=0.5, gravity=\#(["north_west", "north_east", "south_west", "south_east"][$0 % 4]))"#
        }
        let id = try await db.query(
            "SELECT halcyon.enqueue($1, processors => $2, max_attempts => 1) AS id", [photo, thirteen.joined(separator: " |> ") + " |> format(png)"]
        ).value(0, "id")!
        let distinct = (0..<13).map { #"watermark("\#(marks[0])?\#($0)")"# }.joined(separator: " |> ")
        let distinctID = try await db.query(
            "INSERT INTO halcyon.jobs (source, processors, max_attempts) VALUES ($1, $2, 1) RETURNING id", [photo, distinct]
        ).value(0, "id")!
        let (peak, output) = try await Self.drain(db)
        let row = try await db.query(
            "SELECT state::text, last_error, result_width FROM halcyon.jobs WHERE id = $1::bigint", [id])
        #expect(row.value(0, "state") == "succeeded", "\(row.value(0, "last_error") ?? "")")
        #expect(row.value(0, "result_width") == "1200")
        let refused = try await db.query(
            "SELECT state::text, errors->-1->>'code' AS code, last_error FROM halcyon.jobs WHERE id = $1::bigint", [distinctID])
        #expect(refused.value(0, "code") == "job.invalid_chain", "\(refused.value(0, "last_error") ?? "")")
        print("13 watermark steps over four 16 MP marks: worker peak RSS \(peak) MB")
        #expect(peak > 0 && peak < 400, "peak RSS \(peak) MB: \(output.suffix(500))")
    }
}
