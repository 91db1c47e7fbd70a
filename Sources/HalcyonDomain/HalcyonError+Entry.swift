import Foundation
import HalcyonRuntime

extension HalcyonError {
    /// The `errors` entry for this failure, without `at` and `attempt` (the database adds them).
    /// Text is made safe for jsonb (a NUL, e.g. quoted from a file by ImageMagick, would make
    /// PostgreSQL refuse the whole entry).
    public var errorEntry: JSONValue {
        var entry: [String: JSONValue] = ["code": .string(code.description), "message": .string(message.prefix(utf8Bytes: 4096).postgresSafe)]
        if let source { entry["source"] = .string(SourceLabel.label(source).postgresSafe) }
        if let detail { entry["detail"] = .string(detail.prefix(utf8Bytes: 1024).postgresSafe) }
        if bystander { entry["bystander"] = .bool(true) }
        if !sources.isEmpty {
            entry["sources"] = .array(
                sources.map {
                    [
                        "source": .string(SourceLabel.label($0.source).postgresSafe), "code": .string($0.code.description),
                        "message": .string($0.message.prefix(utf8Bytes: 4096).postgresSafe), "attempts": .number(Double($0.attempts)),
                        "permanent": .bool($0.permanent),
                    ]
                })
        }
        return .object(entry)
    }
}

extension String {
    /// The longest prefix of whole characters that is at most `limit` bytes of UTF-8: messages are
    /// kept to 4 KiB on the row, not to 4,096 characters (which can be 16 KiB).
    public func prefix(utf8Bytes limit: Int) -> String {
        guard utf8.count > limit else { return self }
        var bytes = 0
        var end = startIndex
        for character in self {
            let size = character.utf8.count
            guard bytes + size <= limit else { break }
            bytes += size
            end = index(after: end)
        }
        return String(self[..<end])
    }

    /// The text with NUL characters, which PostgreSQL's text and jsonb cannot hold, replaced
    /// by U+FFFD (Swift strings are always valid Unicode, so nothing else needs mending).
    public var postgresSafe: String {
        utf8.contains(0) ? replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : self
    }
}
