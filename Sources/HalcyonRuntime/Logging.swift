import Foundation
import Logging

/// Log line format: `text` for people, `json` (one object per line) for collectors.
public enum LogFormat: String, Sendable, CaseIterable { case text, json }

/// A swift-log handler writing one line per record to standard error.
public struct HalcyonLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let format: LogFormat

    public init(label: String, format: LogFormat, level: Logger.Level) {
        self.label = label
        self.format = format
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level, message = event.message
        var merged = metadata.merging(event.metadata ?? [:]) { $1 }
        if let error = event.error { merged["error"] = "\(error)" }
        let time = ISO8601.format(Date())
        var text: String
        switch format {
        case .text:
            text = "\(time) \(level.rawValue.uppercased()) \(message)"
            for key in merged.keys.sorted() { text += " \(key)=\(merged[key]!)" }
        case .json:
            var object: [String: JSONValue] = [
                "ts": .string(time), "level": .string(level.rawValue),
                "msg": .string(message.description), "logger": .string(label),
            ]
            for (k, v) in merged { object[k] = .string("\(v)") }
            text = JSONValue.object(object).jsonText
        }
        text += "\n"
        writeToStandardError(text)
    }

    /// Installs this handler for the whole process; call once, early.
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in HalcyonLogHandler(label: label, format: format, level: level) }
    }
}

/// Writes to standard error and never fails: a full disk, a file-size limit or a closed pipe
/// under the log loses log lines, not the process (`FileHandle.write` traps on such errors).
public func writeToStandardError(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let n = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if n > 0 { bytes = bytes.dropFirst(n) } else if n < 0 && errno == EINTR { continue } else { return }
    }
}
