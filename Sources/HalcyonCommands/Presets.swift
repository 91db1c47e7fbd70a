import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonChain
import HalcyonDomain
import HalcyonFetch
import HalcyonQueue
import HalcyonRuntime

/// `halcyon preset set|list|delete`: the named chains a job's chain may use as `preset(NAME)`.
struct Presets: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preset",
        abstract: "Manage presets: named chains (and options) a job uses as preset(NAME).",
        discussion: """
            A chain may say preset(NAME) wherever a step goes; the worker expands it when it \
            claims the job, so the result key is the expanded chain's and changing a preset never \
            serves a stale result. halcyon.enqueue_variants(source, ARRAY['a','b','c']) enqueues \
            one job per preset in one statement, decoded once.
            """,
        subcommands: [SetPreset.self, ListPresets.self, DeletePreset.self])

    // Not `Set`/`List`: a nested `Set` would hide Swift's own in this namespace.
    struct SetPreset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set", abstract: "Add or replace a preset.",
            discussion: """
                NAME: a letter or _, then letters, digits or _ (64 at most; the chain grammar \
                lowercases it). CHAIN: steps as in any job, but no preset(…) of its own. \
                --options: job options the preset brings (a job's own options win key by key; \
                callback_url is per job, not per preset).
                """)
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The preset's name.")
        var name: String
        @Argument(help: "Its chain, e.g. 'resize(640x640, mode=fill) |> format(webp, quality=80)'.")
        var chain: String
        @Option(help: "Job options as a JSON object, e.g. '{\"placeholders\": [\"blurhash\"]}'.")
        var options: String = "{}"

        func validate() throws {
            guard Preset.isValidName(name) else {
                throw ValidationError("'\(name)' is not a preset name: a lowercase letter or _, then lowercase letters, digits or _, 64 at most")
            }
        }

        func run() async throws {
            guard Chain.presetNames(inOrder: chain).isEmpty else { throw CommandFailure("a preset cannot use preset(…) itself") }
            let parsed: Chain
            do {
                parsed = try Chain.parse(chain)
                try SourceReference.checkWatermarks(parsed.watermarkSources)
            } catch {
                throw CommandFailure("\(error)")
            }
            guard case .object(let dict)? = JSONValue.parse(options) else { throw CommandFailure("--options must be a JSON object") }
            guard dict["callback_url"] == nil else { throw CommandFailure("callback_url is set per job, not per preset") }
            do {
                _ = try JobOptions.parse(dict)
            } catch {
                throw CommandFailure("\(error)")
            }
            let (connection, _) = try await database.connect()
            let created = try await JobQueue(connection: connection).setPreset(Preset(name: name, processors: chain, options: dict))
            print("\(created ? "created" : "replaced") preset \(name): \(parsed.identifier)")
        }
    }

    struct ListPresets: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the presets with their chains' identifiers.")
        @OptionGroup var database: DatabaseOptions
        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            let (connection, _) = try await database.connect()
            let presets = try await JobQueue(connection: connection).presets()
            func identifier(_ p: Preset) -> String { (try? Chain.parse(p.processors).identifier) ?? "(does not parse)" }
            if json {
                print(
                    JSONValue.array(
                        presets.map {
                            [
                                "name": .string($0.name), "processors": .string($0.processors), "identifier": .string(identifier($0)),
                                "options": .object($0.options),
                            ]
                        }
                    ).prettyText)
                return
            }
            if presets.isEmpty { print("no presets (halcyon preset set NAME CHAIN adds one)") }
            for p in presets {
                print("\(p.name)  \(identifier(p))" + (p.options.isEmpty ? "" : "  options \(JSONValue.object(p.options).jsonText)"))
            }
        }
    }

    struct DeletePreset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete", abstract: "Delete a preset.",
            discussion: "Jobs that name it and are not yet claimed then fail with job.invalid_chain.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The preset's name.")
        var name: String

        func run() async throws {
            let (connection, _) = try await database.connect()
            guard try await JobQueue(connection: connection).deletePreset(named: name) else { throw CommandFailure("no preset named '\(name)'") }
            print("deleted preset \(name)")
        }
    }
}
