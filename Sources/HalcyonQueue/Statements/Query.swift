import Foundation
import HalcyonRuntime
import Synchronization

/// A statement of a query file with its parameters: a value of a conforming type is one call of
/// the statement named `name`, and knows how to write its `$1…$n` (`bind`). Its `Row` decodes
/// what the statement returns. `PGConnection.rows`, `row` and `run` send it.
///
/// Parameter and row types are checked against PostgreSQL by the tests (`QueryFileTests`): each
/// statement is prepared on a migrated database, and its parameter count and types, and its
/// result's column names and types, must be what the Swift side writes and reads; every column
/// its `Row` declares must be read, and change what it decodes (`RowReader.trial`).
public protocol Query: Sendable {
    /// What it returns, a row at a time (default: nothing looked at).
    associatedtype Row: QueryRow = NoRow
    /// The statement's name in its query file (`-- name: …`).
    static var name: String { get }
    /// The query files it is in (default: HalcyonQueue's own, `Queries.queue`).
    static var library: QueryLibrary { get }
    /// Writes `$1…$n`, in order (default: none; the tests check the count against PostgreSQL's).
    func bind(_ parameters: inout QueryParameters)
    /// The values of the statement's literal slots (`/*NAME*/`), by name (default: none).
    var slots: [String: QuerySlot] { get }
}

extension Query {
    public static var library: QueryLibrary { Queries.queue }
    public var slots: [String: QuerySlot] { [:] }
    public func bind(_ parameters: inout QueryParameters) {}

    /// The statement as its file has it.
    public static var statement: QueryLibrary.Statement { library.statement(name) }

    /// The text to send: the file's, with its slots filled.
    public var text: String {
        let statement = Self.statement
        guard !statement.slots.isEmpty else { return statement.text }
        var text = statement.text
        for name in statement.slots {
            guard let value = slots[name] else { preconditionFailure("\(Self.name): slot /*\(name)*/ has no value") }
            text = text.replacingOccurrences(of: "/*\(name)*/", with: value.sql)
        }
        return text
    }

    /// The `$n` values, in order.
    public var parameters: QueryParameters {
        var p = QueryParameters()
        bind(&p)
        return p
    }
}

/// A literal filled into a statement's slot: SQL text made by the code from a closed set of
/// values (never from input), quoted here.
public struct QuerySlot: Sendable, Equatable {
    public let sql: String

    /// String literals, sorted and without repeats; `NULL` for none (`x IN (NULL)` is never true).
    public static func literals(_ values: some Sequence<String>) -> QuerySlot {
        let quoted = Set(values).sorted().map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }
        return QuerySlot(sql: quoted.isEmpty ? "NULL" : quoted.joined(separator: ", "))
    }
}

/// The `$n` values of one call, as PostgreSQL's text format reads them: the one place where
/// Swift values become parameter text (array literals, durations, instants, JSON).
public struct QueryParameters: Sendable {
    public private(set) var values: [String?] = []
    /// What each value is, for the tests' check of what PostgreSQL infers for it.
    public private(set) var kinds: [Kind] = []

    /// A value's type, as far as the check against PostgreSQL's types goes: a parameter's as
    /// written, a result column's as read (`RowReader`).
    public enum Kind: String, Sendable {
        case text, integer, float, boolean, timestamp, json, textArray, integerArray
    }

    public init() {}

    private mutating func append(_ value: String?, _ kind: Kind) {
        values.append(value)
        kinds.append(kind)
    }

    public mutating func add(_ value: String?) { append(value, .text) }
    public mutating func add(_ value: Int?) { append(value.map { String($0) }, .integer) }
    public mutating func add(_ value: Int64?) { append(value.map { String($0) }, .integer) }
    public mutating func add(_ value: Double?) { append(value.map { String($0) }, .float) }
    /// A duration, as seconds (`float8`).
    public mutating func add(_ value: Duration?) { append(value.map { String($0.seconds) }, .float) }
    public mutating func add(_ value: Bool?) { append(value.map { $0 ? "true" : "false" }, .boolean) }
    /// An instant, as ISO 8601 with milliseconds in UTC (`timestamptz`).
    public mutating func add(_ value: Date?) { append(value.map(ISO8601.format), .timestamp) }
    /// An instant as the database wrote it (`timestamptz` text it returned).
    public mutating func add(timestamp value: String?) { append(value, .timestamp) }
    /// JSON text (`jsonb`).
    public mutating func add(json value: String?) { append(value, .json) }
    public mutating func add(json value: JSONValue) { append(value.jsonText, .json) }
    /// A `text[]`: every element quoted (NULL for nil).
    public mutating func add(_ value: [String?]) {
        append("{" + value.map { $0.map(Self.quotedElement) ?? "NULL" }.joined(separator: ",") + "}", .textArray)
    }
    public mutating func add(_ value: [String]) { add(value.map { Optional($0) }) }
    /// An `int[]` or `bigint[]` (NULL for nil).
    public mutating func add(_ value: [Int?]) {
        append("{" + value.map { $0.map { String($0) } ?? "NULL" }.joined(separator: ",") + "}", .integerArray)
    }
    public mutating func add(_ value: [Int]) { add(value.map { Optional($0) }) }
    public mutating func add(_ value: [Int64]) {
        append("{" + value.map { String($0) }.joined(separator: ",") + "}", .integerArray)
    }

    /// An array element in double quotes, `\` and `"` escaped.
    static func quotedElement(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

/// What a statement returns, one value per row: decoded from the result's columns by name.
public protocol QueryRow: Sendable {
    /// The result's column names, in order (the tests check them against the statement's).
    static var columns: [String] { get }
    /// Those of `columns` it does not read, on purpose: a `pg_notify()` or a lock called for its
    /// effect, a row returned only to be counted (default: none; the tests check that every
    /// other column is read).
    static var unread: Set<String> { get }
    /// Decodes one row; nil leaves it out (a row without what makes it one, e.g. its id).
    init?(_ row: RowReader)
}

extension QueryRow {
    public static var unread: Set<String> { [] }
}

/// The row type of a statement whose rows are not looked at.
public struct NoRow: QueryRow {
    public static let columns: [String] = []
    public init?(_ row: RowReader) { nil }
}

/// A row of ids (`RETURNING id`).
public struct IDRow: QueryRow, Equatable {
    public static let columns = ["id"]
    public var id: Int64
    public init?(_ row: RowReader) {
        guard let id = row.int64("id") else { return nil }
        self.id = id
    }
}

/// The row of a `count(*) AS n`.
public struct CountRow: QueryRow, Equatable {
    public static let columns = ["n"]
    public var n: Int
    public init?(_ row: RowReader) { n = row.int("n") ?? 0 }
}

/// One row of a result, read by column name: the one place where result text becomes Swift
/// values (`t`/`f`, numbers, `text[]` literals). Each accessor reads its column as one kind of
/// value (`QueryParameters.Kind`), which the tests check against the column's type (`trial`).
public struct RowReader {
    let values: [String?]
    let columns: ColumnIndex
    /// Where the tests note what is read (`trial`); nil otherwise.
    var reads: ReadLog? = nil

    /// A result's column names and where each is.
    final class ColumnIndex: Sendable {
        let names: [String]
        let positions: [String: Int]
        init(_ names: [String]) {
            self.names = names
            self.positions = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        }
    }

    /// The columns a trial decode read, and as what.
    final class ReadLog: Sendable {
        let kinds = Mutex<[String: Set<QueryParameters.Kind>]>([:])
        func note(_ column: String, _ kind: QueryParameters.Kind) { kinds.withLock { _ = $0[column, default: []].insert(kind) } }
    }

    /// The result's column names, in order.
    public var columnNames: [String] { columns.names }

    /// The text of `column`, nil for NULL. Reading a column the result does not have is a
    /// programming error (the row type and its statement disagree).
    public func text(_ column: String) -> String? { value(column, as: .text) }

    /// A `timestamptz` as PostgreSQL writes it.
    public func instant(_ column: String) -> String? { value(column, as: .timestamp) }
    /// A `json` or `jsonb` value's text.
    public func json(_ column: String) -> String? { value(column, as: .json) }
    public func int(_ column: String) -> Int? { value(column, as: .integer).flatMap { Int($0) } }
    public func int64(_ column: String) -> Int64? { value(column, as: .integer).flatMap { Int64($0) } }
    public func double(_ column: String) -> Double? { value(column, as: .float).flatMap { Double($0) } }
    public func bool(_ column: String) -> Bool? { value(column, as: .boolean).map { $0 == "t" } }
    public func textArray(_ column: String) -> [String]? { value(column, as: .textArray).map(PGRows.parseTextArray) }

    /// The text of `column`, read as a `kind` value.
    func value(_ column: String, as kind: QueryParameters.Kind) -> String? {
        guard let i = columns.positions[column] else {
            assertionFailure("no column '\(column)' in the result (\(columns.names.joined(separator: ", ")))")
            return nil
        }
        return value(at: i, as: kind)
    }

    /// The text of the column at `index`, read as a `kind` value.
    func value(at index: Int, as kind: QueryParameters.Kind) -> String? {
        reads?.note(columns.names[index], kind)
        return values[index]
    }

    /// Each row of `result` as `Row` (rows it leaves out are skipped).
    static func decode<Row: QueryRow>(_ result: PGRows, as: Row.Type) -> [Row] {
        let index = ColumnIndex(result.columns)
        return result.rows.compactMap { Row(RowReader(values: $0, columns: index)) }
    }

    /// One row of `columns` holding `values`, decoded as `Row`, and what the decoding read of
    /// which column, as which kind: how the tests check a row type against its statement's
    /// result (`QueryChecks`).
    public static func trial<Row: QueryRow>(
        _ type: Row.Type, columns: [String], values: [String?]
    ) -> (
        row: Row?, reads: [String: Set<QueryParameters.Kind>]
    ) {
        let log = ReadLog()
        let row = Row(RowReader(values: values, columns: ColumnIndex(columns), reads: log))
        return (row, log.kinds.withLock { $0 })
    }
}

extension PGConnection {
    /// Sends `query` and returns its rows. (A `many` statement.)
    public func rows<Q: Query>(_ query: Q, timeout: Double? = nil) async throws -> [Q.Row] {
        assert(Q.statement.kind == .many, "\(Q.name) is :\(Q.statement.kind.rawValue), not :many")
        return RowReader.decode(try await result(query, timeout: timeout), as: Q.Row.self)
    }

    /// Sends `query` and returns its row, if any. (A `one` statement.)
    public func row<Q: Query>(_ query: Q, timeout: Double? = nil) async throws -> Q.Row? {
        assert(Q.statement.kind == .one, "\(Q.name) is :\(Q.statement.kind.rawValue), not :one")
        return RowReader.decode(try await result(query, timeout: timeout), as: Q.Row.self).first
    }

    /// Sends `query`; returns how many rows it affected or returned. (Any statement.)
    @discardableResult
    public func run<Q: Query>(_ query: Q, timeout: Double? = nil) async throws -> Int {
        try await result(query, timeout: timeout).affected
    }

    /// Sends `query` and returns its result as text, undecoded.
    public func result<Q: Query>(_ query: Q, timeout: Double? = nil) async throws -> PGRows {
        try await execute(query.text, query.parameters.values, timeout: timeout)
    }

    /// `rows` for use inside `withLocked`.
    public func rowsLocked<Q: Query>(_ query: Q) throws -> [Q.Row] {
        assert(Q.statement.kind == .many, "\(Q.name) is :\(Q.statement.kind.rawValue), not :many")
        return RowReader.decode(try executeLocked(query.text, query.parameters.values), as: Q.Row.self)
    }

    /// `row` for use inside `withLocked`.
    public func rowLocked<Q: Query>(_ query: Q, timeout: Double? = nil) throws -> Q.Row? {
        assert(Q.statement.kind == .one, "\(Q.name) is :\(Q.statement.kind.rawValue), not :one")
        return RowReader.decode(try executeLocked(query.text, query.parameters.values, timeout: timeout), as: Q.Row.self).first
    }

    /// `run` for use inside `withLocked`.
    @discardableResult
    public func runLocked<Q: Query>(_ query: Q) throws -> Int {
        try executeLocked(query.text, query.parameters.values).affected
    }
}

extension PGConnection {
    /// Runs `body` in a transaction, inside `withLocked`: committed when it returns, rolled back
    /// when it throws.
    public func transactionLocked<T>(_ body: () throws -> T) throws -> T {
        try runLocked(SQL.Begin())
        do {
            let value = try body()
            try runLocked(SQL.Commit())
            return value
        } catch {
            _ = try? runLocked(SQL.Rollback())
            throw error
        }
    }
}
