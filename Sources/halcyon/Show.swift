import ArgumentParser
import Foundation
import HalcyonCore
import HalcyonQueue

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one job: its inputs, state, result and every attempt's error.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @Argument(help: "Job id.")
    var id: Int64
    @Flag(help: "Print JSON.")
    var json = false

    static let numericColumns: Set<String> = ["id", "priority", "attempt", "max_attempts", "result_bytes", "result_width", "result_height"]

    func run() async throws {
        let (connection, _) = try await database.connect()
        guard let row = try await JobQueue(connection: connection).show(id: id) else {
            throw CommandFailure("no job \(id)")
        }
        var object: [String: JSONValue] = [:]
        for (key, value) in row {
            guard let value else { object[key] = .null; continue }
            switch key {
            case "options", "errors": object[key] = JSONValue.parse(value) ?? .string(value)
            case "fallback_sources": object[key] = .array(PGRows.parseTextArray(value).map { .string($0) })
            case "cache_hit": object[key] = .bool(value == "t")
            case _ where Self.numericColumns.contains(key): object[key] = Double(value).map { .number($0) } ?? .string(value)
            default: object[key] = .string(value)
            }
        }
        if let path = object["result_path"]?.stringValue {
            object["result_file"] = .string(storeOptions.root().appendingPathComponent(path).path)
        }
        if json {
            print(JSONValue.object(object).prettyText)
            return
        }
        let order = ["id", "state", "source", "fallback_sources", "processors", "cache_key", "options", "priority",
                     "attempt", "max_attempts", "run_at", "locked_by", "locked_until", "created_at", "started_at", "finished_at",
                     "result_key", "result_source", "result_format", "result_width", "result_height", "result_bytes",
                     "result_digest", "result_path", "result_file", "cache_hit", "last_error"]
        for key in order {
            guard let v = object[key], v != .null else { continue }
            let text = v.stringValue ?? v.jsonText
            print("\(key.padding(toLength: 17, withPad: " ", startingAt: 0)) \(text)")
        }
        if let errors = object["errors"]?.arrayValue, !errors.isEmpty {
            print("errors:")
            for e in errors {
                let at = e["at"]?.stringValue ?? "?", attempt = e["attempt"]?.numberValue.map { String(Int($0)) } ?? "?"
                print("  attempt \(attempt) at \(at): \(e["code"]?.stringValue ?? "?"): \(e["message"]?.stringValue ?? "")")
                for s in e["sources"]?.arrayValue ?? [] {
                    print("    \(s["source"]?.stringValue ?? "?") → \(s["code"]?.stringValue ?? "?"): \(s["message"]?.stringValue ?? "")")
                }
            }
        }
    }
}
