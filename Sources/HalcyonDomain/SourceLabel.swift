import HalcyonRuntime

/// How a source is named where it is copied — error entries, `result_source`, webhook bodies:
/// whole up to 4 KiB (any URL a user would compare), else its first 64 characters, its size and
/// its SHA-256 (hex, of its UTF-8): enough to tell two long sources apart or match one to a file.
/// A source may be an inline `data:` URI of up to 14 MiB; copied whole, every one of a job's
/// error entries (up to 50 kept) and every webhook POST would carry it.
public enum SourceLabel {
    /// The largest source copied whole, in bytes of UTF-8.
    public static let maxBytes = 4096
    /// Characters kept of a longer one.
    public static let keptCharacters = 64

    public static func label(_ source: String) -> String {
        let bytes = source.utf8.count
        guard bytes > maxBytes else { return source }
        return "\(source.prefix(keptCharacters))… (\(bytes) bytes, sha256 \(Digest.sha256Hex(source)))"
    }

    /// The same, as an SQL expression over a text column (for statements that copy a row's
    /// source themselves, e.g. a rescue's error entry). `left` counts characters, as `prefix` does.
    public static func sql(_ column: String) -> String {
        "CASE WHEN octet_length(\(column)) > \(maxBytes) THEN left(\(column), \(keptCharacters)) || '… (' || octet_length(\(column)) || ' bytes, sha256 ' || encode(sha256(convert_to(\(column), 'UTF8')), 'hex') || ')' ELSE \(column) END"
    }
}
