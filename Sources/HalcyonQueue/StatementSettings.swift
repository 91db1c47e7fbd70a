import Foundation

/// Server settings Halcyon gives its own statements, whatever the server's configuration.
///
/// They are applied per statement and transaction-locally: before a statement that starts a
/// transaction, the connection sends `SELECT set_config(name, value, true)` for each setting
/// in the same round trip (one libpq pipeline, one transaction), so a setting costs no round
/// trip and ends with the statement's transaction. Nothing is set on the session, so nothing
/// leaks to other clients of a pooler in transaction mode (PgBouncer), and no startup
/// `options` parameter is needed (PgBouncer refuses unknown ones).
public struct StatementSettings: Sendable, Equatable {
    /// Name and value of each setting, in the order they are applied.
    public var values: [Setting]

    public struct Setting: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(_ values: [Setting]) {
        self.values = values
    }

    /// What every connection of Halcyon's uses.
    ///
    /// `jit = off`: PostgreSQL compiles a statement with LLVM when its estimated cost passes
    /// `jit_above_cost` (100,000 by default; JIT is on by default since PostgreSQL 12). A queue's
    /// statements touch a few rows each and run hundreds of times a second; on a large, churned
    /// table their estimates can pass the threshold, and compiling then costs 40–900 ms for a
    /// statement that runs in 2 ms. JIT never earns that back on such statements.
    public static let halcyon = StatementSettings([Setting("jit", "off")])

    /// What reports over many rows use (the dashboard, `halcyon usage`): Halcyon's settings and
    /// `work_mem = 64MB`, so that grouping 300,000 fair keys' usage hashes in memory rather than
    /// spilling to disk (at PostgreSQL's default of 4 MB it took twice as long). It is per
    /// statement, and a hash may take twice it (`hash_mem_multiplier`): the dashboard's few
    /// connections bound what it can ask of the server. `plan_cache_mode = force_custom_plan`:
    /// a report's parameters decide its shape (by key or by queue, one key or all), and only a
    /// plan made for them reads a page's rows through an index; planning costs a millisecond,
    /// the report hundreds.
    public static let reports = StatementSettings([
        Setting("jit", "off"), Setting("work_mem", "64MB"), Setting("plan_cache_mode", "force_custom_plan"),
    ])

    /// None: the server's own settings (to measure what Halcyon's settings change).
    public static let server = StatementSettings([])

    /// The statement that applies the settings (nil when there are none). The values are
    /// fixed by the code, never by input, and quoted all the same.
    var prefix: String? {
        guard !values.isEmpty else { return nil }
        return "SELECT "
            + values.map { "set_config(\(Self.literal($0.name)), \(Self.literal($0.value)), true)" }.joined(separator: ", ")
    }

    /// Whether a statement is one the settings are for: a query the planner plans (`SELECT`,
    /// `WITH`, `INSERT`, `UPDATE`, `DELETE`, `MERGE`, `VALUES`, `TABLE`, `EXPLAIN`) or the
    /// `BEGIN` of a block whose statements then share them. Other commands are sent as they are:
    /// nothing in them is compiled, and some (`CREATE DATABASE`, `VACUUM`) refuse to run inside a
    /// transaction, which the settings' pipeline is.
    static func applies(to sql: String) -> Bool {
        guard let word = firstKeyword(of: sql) else { return false }
        return planned.contains(word)
    }

    static let planned: Set<String> = [
        "select", "with", "insert", "update", "delete", "merge", "values", "table", "explain", "begin", "start",
    ]

    /// The statement's first word, lowercased, after white space and comments (`--`, `/* */`).
    static func firstKeyword(of sql: String) -> String? {
        var bytes = sql.utf8[...]
        while let b = bytes.first {
            if b == UInt8(ascii: " ") || b == UInt8(ascii: "\n") || b == UInt8(ascii: "\t") || b == UInt8(ascii: "\r") || b == UInt8(ascii: "(") {
                bytes = bytes.dropFirst()
            } else if bytes.starts(with: "--".utf8) {
                bytes = bytes.drop { $0 != UInt8(ascii: "\n") }
            } else if bytes.starts(with: "/*".utf8) {
                // PostgreSQL's block comments nest.
                var depth = 0
                while !bytes.isEmpty {
                    if bytes.starts(with: "/*".utf8) {
                        depth += 1
                        bytes = bytes.dropFirst(2)
                    } else if bytes.starts(with: "*/".utf8) {
                        depth -= 1
                        bytes = bytes.dropFirst(2)
                        if depth == 0 { break }
                    } else {
                        bytes = bytes.dropFirst()
                    }
                }
            } else {
                break
            }
        }
        let word = bytes.prefix { (b: UInt8) in (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") }
        return word.isEmpty ? nil : String(decoding: word, as: UTF8.self).lowercased()
    }

    private static func literal(_ s: String) -> String {
        "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
    }
}
