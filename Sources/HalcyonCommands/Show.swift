import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show one job: its inputs, state, result and every attempt's error.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @Argument(help: "Job id.")
    var id: Int64
    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        let (connection, _) = try await database.connect()
        let queue = JobQueue(connection: connection)
        guard let row = try await queue.job(id: id) else {
            throw CommandFailure("no job \(id) in \(database.described)")
        }
        // Every column: numbers, booleans and arrays as such, jsonb parsed, the rest as text.
        var object = row.json
        let location = try storeOptions.location()
        let store = try storeOptions.open()
        let path = object["result_path"]?.stringValue
        // The result's expiry is its key's (a file's mtime, or an S3 object's metadata), under
        // the key the worker stores it by: scoped by the queue's name in an isolated queue.
        var times: (expires: Date, accessed: Date)?
        var unreachable: String?
        let key = object["result_key"]?.stringValue
        var storeKey = key
        if let key, let name = object["queue"]?.stringValue, try await queue.isolatesKeys(queue: name) {
            storeKey = StoreLayout.storeKey(key, scope: name)
        }
        switch (location, store) {
        case (.directory(let root), _):
            if let path { object["result_file"] = .string(root.appendingPathComponent(path).path) }
            if let storeKey, let t = FileTimes.read(root.appendingPathComponent(StoreLayout.keyPath(for: storeKey)).path) {
                times = (t.expires, t.accessed)
            }
        case (.objectStore, let bucket as ObjectStore):
            if let path {
                object["result_object"] = .string(bucket.url(forRelativePath: path))
                // A link that fetches it without credentials, for an hour.
                if let url = try? bucket.presignedURL(forRelativePath: path, valid: .hours(1)) { object["result_url"] = .string(url.absoluteString) }
            }
            if let storeKey {
                do {
                    times = try await bucket.keyTimes(storeKey)
                } catch {
                    // Not an absent key: the bucket did not answer (or refused the credentials).
                    unreachable = String(describing: error)
                }
            }
        default:
            break
        }
        if key != nil {
            if let times {
                object["result_expires"] = .string(times.expires >= StorageExpiration.neverInstant ? "never" : ISO8601.format(times.expires))
                object["result_last_access"] = .string(ISO8601.format(times.accessed))
            } else if let unreachable {
                object["result_expires"] = .string("unknown: the store could not be reached (\(unreachable))")
            } else {
                object["result_expires"] = .string("not in the store (expired and swept, or another store)")
            }
        }
        output(object)
        // The row was shown; the store's part of it could not be: say so, and fail.
        if let unreachable {
            throw CommandFailure("the store \(location) could not be reached: \(unreachable)")
        }
    }

    /// The row as text (the columns `order` names, then any other column of `JobRow.schema`, then
    /// the timings and the errors) or JSON.
    private func output(_ object: [String: JSONValue]) {
        if json {
            print(JSONValue.object(object).prettyText)
            return
        }
        let order = [
            "id", "state", "queue", "fair_key", "tags", "unique_key", "traceparent", "tracestate", "trace_id", "source", "fallback_sources",
            "processors",
            "cache_key", "options", "priority",
            "attempt", "max_attempts", "run_at", "locked_by", "locked_until", "created_at", "started_at", "finished_at",
            "source_format", "source_width", "source_height", "source_bytes", "source_meta", "source_pdq", "source_pdq_quality",
            "source_pdq_dihedral", "result_key", "result_source", "result_format",
            "result_width", "result_height", "result_bytes", "result_quality", "result_quality_exact", "result_chroma", "result_score",
            "result_target_missed", "result_pdq", "result_pdq_quality",
            "result_digest", "result_path", "result_file", "result_object", "result_url", "result_expires", "result_last_access", "cache_hit",
            "placeholders", "result_manifest", "last_error",
            "callback_status", "callback_attempts", "callback_at", "callback_error",
        ]
        let rest = JobRow.schema.map(\.name).filter { !order.contains($0) && $0 != "timings" && $0 != "errors" }
        for key in order + rest {
            guard let v = object[key], v != .null, v != .array([]), !(key == "callback_attempts" && object["callback_status"] == .null) else {
                continue
            }
            if key == "result_manifest", let manifest = PictureManifest(jsonText: v.jsonText) {
                // A picture set: a line per rung, then its markup.
                print("rungs               \(manifest.rungs.count) (\(manifest.formats.map(\.rawValue).joined(separator: ", ")))")
                for r in manifest.rungs {
                    let score = r.score.map { String(format: "score %.2f", $0) } ?? "no score"
                    print(
                        "  \(r.format.rawValue.padding(toLength: 5, withPad: " ", startingAt: 0)) \("\(r.width)x\(r.height)".padding(toLength: 10, withPad: " ", startingAt: 0)) \(String(r.bytes).leftPadded(9)) bytes  q\(r.quality.map(String.init) ?? "-")  \(score)  \(r.path)"
                    )
                }
                if let picture = v["picture"]?.stringValue { print("picture             \(picture)") }
                continue
            }
            let text = v.stringValue ?? v.jsonText
            print("\(key.padding(toLength: 19, withPad: " ", startingAt: 0)) \(text)")
        }
        if case .object(let t)? = object["timings"] {
            let stages = ["queue_wait", "fetch", "decode", "process", "encode", "store", "total"].compactMap { stage -> String? in
                t["\(stage)_ms"]?.numberValue.map { "\(stage.replacingOccurrences(of: "_", with: " ")) \(Self.milliseconds($0))" }
            }
            print("timings".padding(toLength: 19, withPad: " ", startingAt: 0) + " " + stages.joined(separator: " · "))
        }
        if let errors = object["errors"]?.arrayValue, !errors.isEmpty {
            print("errors:")
            for e in errors {
                let at = e["at"]?.stringValue ?? "?", attempt = e["attempt"]?.numberValue.map { String(Int(saturating: $0)) } ?? "?"
                print("  attempt \(attempt) at \(at): \(e["code"]?.stringValue ?? "?"): \(e["message"]?.stringValue ?? "")")
                for s in e["sources"]?.arrayValue ?? [] {
                    print("    \(s["source"]?.stringValue ?? "?") → \(s["code"]?.stringValue ?? "?"): \(s["message"]?.stringValue ?? "")")
                }
            }
        }
    }

    static func milliseconds(_ ms: Double) -> String {
        ms >= 1000 ? String(format: "%.2f s", ms / 1000) : String(format: ms < 10 ? "%.1f ms" : "%.0f ms", ms)
    }
}

extension String {
    /// Right-aligned in `width` characters.
    fileprivate func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
