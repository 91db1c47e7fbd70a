import Foundation

// similar.sql: near-duplicates by perceptual hash.

extension SQL {
    struct SimilarImages: Query {
        typealias Row = SimilarImageRow
        static let name = "similarImages"
        var hash: String
        var maxDistance: Int
        var limit: Int

        func bind(_ p: inout QueryParameters) {
            p.add(hash)
            p.add(maxDistance)
            p.add(limit)
        }
    }

    struct SimilarToJob: Query {
        typealias Row = SimilarImageRow
        static let name = "similarToJob"
        var id: Int64
        var maxDistance: Int
        var dihedral: Bool
        var limit: Int

        func bind(_ p: inout QueryParameters) {
            p.add(id)
            p.add(maxDistance)
            p.add(dihedral)
            p.add(limit)
        }
    }

    struct SimilarImageRow: QueryRow {
        static let columns = ["job_id", "distance", "variant", "source", "state", "source_pdq_quality"]
        var image: JobQueue.SimilarImage

        init?(_ row: RowReader) {
            guard let id = row.int64("job_id"), let distance = row.int("distance") else { return nil }
            image = JobQueue.SimilarImage(
                jobID: id, distance: distance, variant: row.text("variant") ?? "original", source: row.text("source") ?? "",
                state: row.text("state") ?? "", quality: row.int("source_pdq_quality"))
        }
    }
}

extension JobQueue {
    /// A job whose source is a near-duplicate: its id, how many bits its PDQ hash differs by,
    /// which of the asking hashes matched (`original`, or a dihedral variant such as `flipy`),
    /// its source, state and hash quality.
    public struct SimilarImage: Sendable, Equatable {
        public var jobID: Int64
        public var distance: Int
        public var variant: String
        public var source: String
        public var state: String
        public var quality: Int?
    }

    /// The jobs whose source's PDQ hash is within `maxDistance` bits of `hash`, nearest first.
    public func similarImages(hash: String, maxDistance: Int, limit: Int) async throws -> [SimilarImage] {
        try await connection.rows(SQL.SimilarImages(hash: hash, maxDistance: maxDistance, limit: limit)).map(\.image)
    }

    /// The near-duplicates of job `id`'s source (with `dihedral`, of its turned and mirrored
    /// copies too), nearest first, the job itself left out.
    public func similarImages(toJob id: Int64, maxDistance: Int, dihedral: Bool, limit: Int) async throws -> [SimilarImage] {
        try await connection.rows(SQL.SimilarToJob(id: id, maxDistance: maxDistance, dihedral: dihedral, limit: limit)).map(\.image)
    }
}
