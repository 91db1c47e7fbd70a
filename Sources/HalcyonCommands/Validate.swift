import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonChain
import HalcyonEmbedded
import HalcyonFetch
import HalcyonQueue

struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a processor chain: print its canonical identifier (exit 0) or the error (exit 1).",
        discussion: """
            The chain is judged as a worker judges it before any download: its grammar, every \
            step's arguments, and its watermark sources (their form and scheme; --file-root and S3 \
            credentials are the worker's to judge).

            A chain naming presets (preset(NAME)) is checked with the presets of the database \
            (--database-url, as every command finds it); a chain without presets needs no \
            database. Validate creates nothing: with no database configured and no embedded \
            cluster made yet, a chain naming presets is an error that says how to give one.
            """)
    @Argument(help: "The chain, e.g. 'resize(320x320, mode=fill) |> format(jpeg, quality=82)'.")
    var chain: String
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        var presets: [String: String] = [:]
        let named = Chain.presetNames(inOrder: chain)
        if !named.isEmpty {
            // Presets live in the database: without it they cannot be checked, and saying every
            // one is unknown would be false.
            let names = named.joined(separator: ", ")
            if case .embedded(let cluster) = database.target, !cluster.exists {
                printError(
                    "the chain names presets (\(names)), which are read from a database, and none is configured: give one with --database-url, DATABASE_URL or the PG* variables (there is no embedded cluster at \(cluster.home.appendingPathComponent("pg").path), and validate does not create one)"
                )
                throw ExitCode(1)
            }
            do {
                let (connection, _) = try await database.connect()
                defer { Task { await connection.close() } }
                for preset in try await JobQueue(connection: connection).presets() { presets[preset.name] = preset.processors }
            } catch {
                printError("the chain names presets (\(names)), which are read from the database, and it could not be read: \(error)")
                throw ExitCode(1)
            }
        }
        do {
            let parsed = try Chain.parse(chain, presets: presets)
            try SourceReference.checkWatermarks(parsed.watermarkSources)
            print(parsed.identifier)
        } catch {
            printError("\(error)")
            throw ExitCode(1)
        }
    }
}
