import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonImage
import HalcyonQueue

struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a processor chain: print its canonical identifier (exit 0) or the error (exit 1).",
        discussion: """
            A chain naming presets (preset(NAME)) is checked with the presets of the database \
            (--database-url, as every command finds it); a chain without presets needs no database.
            """)
    @Argument(help: "The chain, e.g. 'resize(320x320, mode=fill) |> format(jpeg, quality=82)'.")
    var chain: String
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        var presets: [String: String] = [:]
        let named = ProcessorChain.presetNames(inOrder: chain)
        if !named.isEmpty {
            // Presets live in the database: without it they cannot be checked, and saying every
            // one is unknown would be false.
            do {
                let (connection, _) = try await database.connect()
                defer { Task { await connection.close() } }
                for preset in try await JobQueue(connection: connection).presets() { presets[preset.name] = preset.processors }
            } catch {
                printError(
                    "the chain names presets (\(named.joined(separator: ", "))), which are read from the database, and it could not be read: \(error)"
                )
                throw ExitCode(1)
            }
        }
        do {
            print(try ProcessorChain.parse(chain, presets: presets).identifier)
        } catch {
            printError("\(error)")
            throw ExitCode(1)
        }
    }
}
