import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime

struct Similar: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "similar",
        abstract: "List the jobs whose source is a near-duplicate of a job's source, or of a PDQ hash.",
        discussion: """
            Jobs enqueued with the option "perceptual_hash" record their source's PDQ hash \
            (source_pdq). This lists the jobs whose hash is within --max-distance bits of job \
            ID's (the job itself left out) or of --hash, nearest first: id, distance, the hash \
            that matched (original, or with --dihedral a turned or mirrored variant of job ID's, \
            which it has when it was enqueued with "perceptual_hash": "dihedral"), state, hash \
            quality and source. 31 bits or fewer is the same picture by Meta's figures; a hash \
            of quality under 50 says little. Up to 47 bits the lookup reads an index; beyond, \
            every hashed row.
            """)

    @OptionGroup var database: DatabaseOptions
    @Argument(help: "A job id (its source's hash is the one looked for).")
    var id: Int64?
    @Option(help: "A PDQ hash (64 hex digits) to look for instead of a job's.")
    var hash: String?
    @Option(help: "Most bits a near-duplicate's hash may differ by (0–256).")
    var maxDistance = PerceptualHash.matchDistance
    @Flag(help: "Also look for job ID's turned and mirrored copies (its dihedral hashes).")
    var dihedral = false
    @Option(help: "Most jobs to list (1–10000).")
    var limit = 100
    @Flag(help: "Print JSON.")
    var json = false

    func validate() throws {
        guard (id == nil) != (hash == nil) else { throw ValidationError("give a job id or --hash, not both") }
        if let hash, PerceptualHash(hex: hash.lowercased(), quality: 0) == nil {
            throw ValidationError("--hash must be 64 hex digits (a PDQ hash), got '\(hash.prefix(80))'")
        }
        guard (0...256).contains(maxDistance) else { throw ValidationError("--max-distance must be 0 to 256") }
        guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be 1 to 10000") }
        if dihedral, id == nil { throw ValidationError("--dihedral needs a job id (its dihedral hashes)") }
    }

    func run() async throws {
        let (connection, _) = try await database.connect()
        defer { Task { await connection.close() } }
        let queue = JobQueue(connection: connection)
        let found: [JobQueue.SimilarImage]
        if let id {
            guard let row = try await queue.job(id: id) else { throw CommandFailure("no job \(id) in \(database.described)") }
            guard row.sourcePDQ != nil else {
                throw CommandFailure("job \(id) has no perceptual hash (enqueue it with the option \"perceptual_hash\": true)")
            }
            if dihedral, row.sourcePDQDihedral == nil {
                throw CommandFailure("job \(id) has no dihedral hashes (enqueue it with \"perceptual_hash\": \"dihedral\")")
            }
            found = try await queue.similarImages(toJob: id, maxDistance: maxDistance, dihedral: dihedral, limit: limit)
        } else {
            found = try await queue.similarImages(hash: (hash ?? "").lowercased(), maxDistance: maxDistance, limit: limit)
        }
        if json {
            let rows: [JSONValue] = found.map { s in
                [
                    "id": .number(Double(s.jobID)), "distance": .number(Double(s.distance)), "variant": .string(s.variant),
                    "state": .string(s.state), "quality": s.quality.map { .number(Double($0)) } ?? .null,
                    "source": .string(SourceLabel.label(s.source)),
                ]
            }
            print(JSONValue.array(rows).prettyText)
            return
        }
        guard !found.isEmpty else {
            print("no job within \(maxDistance) bits")
            return
        }
        print("id".padding(toLength: 10, withPad: " ", startingAt: 0) + " distance  variant     state      quality  source")
        for s in found {
            let id = String(s.jobID).padding(toLength: 10, withPad: " ", startingAt: 0)
            let distance = String(s.distance).padding(toLength: 9, withPad: " ", startingAt: 0)
            let variant = s.variant.padding(toLength: 11, withPad: " ", startingAt: 0)
            let state = s.state.padding(toLength: 10, withPad: " ", startingAt: 0)
            let quality = (s.quality.map(String.init) ?? "-").padding(toLength: 8, withPad: " ", startingAt: 0)
            print("\(id) \(distance) \(variant) \(state) \(quality) \(SourceLabel.label(s.source))")
        }
    }
}
