import CLibPQ
import Dispatch
import Foundation

/// The rows of a query result, in text format.
public struct PGRows: Sendable {
    public var columns: [String]
    public var rows: [[String?]]
    /// Rows affected by INSERT/UPDATE/DELETE (or returned).
    public var affected: Int

    public var count: Int { rows.count }

    /// The value of `column` in row `row`, nil for SQL NULL, an unknown column or a row that
    /// is not there.
    public func value(_ row: Int, _ column: String) -> String? {
        guard rows.indices.contains(row), let c = columns.firstIndex(of: column) else { return nil }
        return rows[row][c]
    }

    /// Each row as a column → value dictionary.
    public var dictionaries: [[String: String?]] {
        rows.map { Dictionary(uniqueKeysWithValues: zip(columns, $0)) }
    }
}

extension PGRows {
    /// Parses a PostgreSQL text array of simple strings (`{a,"b c"}`) into Swift strings.
    public static func parseTextArray(_ text: String) -> [String] {
        guard text.hasPrefix("{"), text.hasSuffix("}") else { return [] }
        let body = text.dropFirst().dropLast()
        var items: [String] = [], current = "", quoted = false, escaped = false, wasQuoted = false
        for ch in body {
            if escaped { current.append(ch); escaped = false; continue }
            switch ch {
            case "\\" where quoted: escaped = true
            case "\"": quoted.toggle(); wasQuoted = true
            case "," where !quoted:
                items.append(current); current = ""; wasQuoted = false
            default: current.append(ch)
            }
        }
        if !body.isEmpty || wasQuoted { items.append(current) }
        return items
    }

    /// Renders Swift strings as a PostgreSQL text array literal.
    public static func textArrayLiteral(_ items: [String]) -> String {
        "{" + items.map(QueryParameters.quotedElement).joined(separator: ",") + "}"
    }
}
