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
        var merged = metadata.merging(event.metadata ?? [:]) { $1 }
        if let error = event.error { merged["error"] = "\(error)" }
        let line = Self.line(
            time: ISO8601.format(Date()), level: event.level, message: event.message.description, label: label, metadata: merged, format: format)
        writeToStandardError(line + "\n")
    }

    /// One event as one line, without its line feed: the text format escapes control characters
    /// in the message and in every key and value (`LogText.escaped`), the JSON format escapes
    /// them as JSON does; either way every secret this process registered (`LogSecrets`) is
    /// masked.
    public static func line(
        time: String, level: Logger.Level, message: String, label: String, metadata: Logger.Metadata, format: LogFormat
    ) -> String {
        switch format {
        case .text:
            var text = "\(time) \(level.rawValue.uppercased()) \(LogText.escaped(LogSecrets.scrub(message)))"
            for key in metadata.keys.sorted() {
                text += " \(LogText.escaped(key))=\(LogText.escaped(LogSecrets.scrub("\(metadata[key]!)")))"
            }
            return text
        case .json:
            var object: [String: JSONValue] = [
                "ts": .string(time), "level": .string(level.rawValue),
                "msg": .string(LogSecrets.scrub(message)), "logger": .string(label),
            ]
            for (k, v) in metadata { object[k] = .string(LogSecrets.scrub("\(v)")) }
            return JSONValue.object(object).jsonText
        }
    }

    /// Installs this handler for the whole process and registers the secrets its environment and
    /// command line hold (`LogSecrets.registerProcess`); call once, early.
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LogSecrets.registerProcess()
        LoggingSystem.bootstrap { label in HalcyonLogHandler(label: label, format: format, level: level) }
    }
}

/// Text as one line of a text log: the C0 controls (line feed, carriage return, tab, escape, …),
/// DEL, the C1 controls (NEL among them), the line and paragraph separators (U+2028, U+2029) and
/// the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) are written
/// as escapes — `\n`, `\r`, `\t`, else `\u` and four hex digits — and a backslash as `\\`, so a
/// value can neither end its line, forge the next one, move the cursor nor reorder what a
/// terminal shows, and the escaping can be undone.
public enum LogText {
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            default:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            }
        }
        return out
    }

    /// Whether `scalar` is written escaped.
    public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x5C, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
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
