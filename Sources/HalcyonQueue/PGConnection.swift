import CLibPQ
import Dispatch
import Foundation
import HalcyonCore

/// A database failure. `connectionLost` tells callers that retrying after a reconnect may help.
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var sqlState: String?
    public var connectionLost: Bool

    public var description: String {
        (sqlState.map { "[\($0)] " } ?? "") + message
    }
}

/// The rows of a query result, in text format.
public struct PGRows: Sendable {
    public var columns: [String]
    public var rows: [[String?]]
    /// Rows affected by INSERT/UPDATE/DELETE (or returned).
    public var affected: Int

    public var count: Int { rows.count }

    /// The value of `column` in row `row`, nil for SQL NULL or an unknown column.
    public func value(_ row: Int, _ column: String) -> String? {
        guard let c = columns.firstIndex(of: column) else { return nil }
        return rows[row][c]
    }

    /// Each row as a column → value dictionary.
    public var dictionaries: [[String: String?]] {
        rows.map { Dictionary(uniqueKeysWithValues: zip(columns, $0)) }
    }
}

/// One libpq connection. It is owned by a private serial queue: every libpq call runs there,
/// off Swift's cooperative pool, and never on two threads at once. A dropped connection is
/// re-established on the next call; the failing call throws with `connectionLost`.
public final class PGConnection: @unchecked Sendable {
    /// libpq connection string or URI; empty means the standard `PG*` variables.
    public let conninfo: String
    private let queue: DispatchQueue
    private var handle: OpaquePointer?  // touched only on `queue`

    private init(conninfo: String, label: String) {
        self.conninfo = conninfo
        self.queue = DispatchQueue(label: "halcyon.pg.\(label)")
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Opens a connection.
    public static func connect(_ conninfo: String, label: String = "main") async throws -> PGConnection {
        let c = PGConnection(conninfo: conninfo, label: label)
        try await c.onQueue { try c.ensureConnected() }
        return c
    }

    /// Opens a connection from a thread that may block (not the cooperative pool).
    public static func connectBlocking(_ conninfo: String, label: String) throws -> PGConnection {
        let c = PGConnection(conninfo: conninfo, label: label)
        try c.sync { try c.ensureConnected() }
        return c
    }

    /// Runs one statement with text parameters (`$1`, `$2`, …) and returns its rows.
    @discardableResult
    public func execute(_ sql: String, _ params: [String?] = []) async throws -> PGRows {
        try await onQueue { try self.executeLocked(sql, params) }
    }

    /// Runs several statements (no parameters) in one round trip, e.g. a migration file.
    public func executeScript(_ sql: String) async throws {
        try await onQueue { try self.executeScriptLocked(sql) }
    }

    /// `executeScript` for use inside `withLocked`.
    public func executeScriptLocked(_ sql: String) throws {
        dispatchPrecondition(condition: .onQueue(queue))
        try ensureConnected()
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result)
    }

    /// Runs `body` with exclusive use of the connection, on its thread. The closure may call
    /// `executeLocked` repeatedly (a transaction, LISTEN handling) without hopping threads.
    public func withLocked<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        try await onQueue { try body(self) }
    }

    /// `execute` for use inside `withLocked`.
    @discardableResult
    public func executeLocked(_ sql: String, _ params: [String?] = []) throws -> PGRows {
        dispatchPrecondition(condition: .onQueue(queue))
        try ensureConnected()
        let result = withCStrings(params) { values in
            PQexecParams(handle, sql, Int32(params.count), nil, values, nil, nil, 0)
        }
        defer { PQclear(result) }
        try check(result)
        return rows(of: result)
    }

    /// Closes the connection now.
    public func close() async {
        _ = try? await onQueue {
            if let h = self.handle { PQfinish(h) }
            self.handle = nil
        }
    }

    // MARK: Notifications (used by `JobListener`, on this connection's thread)

    /// The socket to poll for notifications, or -1.
    func socketLocked() -> Int32 {
        guard let handle else { return -1 }
        return PQsocket(handle)
    }

    /// Reads whatever arrived on the socket and returns the channels notified.
    func consumeNotificationsLocked() throws -> [String] {
        guard let handle else { throw DatabaseError(message: "not connected", connectionLost: true) }
        if PQconsumeInput(handle) == 0 || PQstatus(handle) != CONNECTION_OK {
            throw DatabaseError(message: errorMessage(), connectionLost: true)
        }
        var channels: [String] = []
        while let n = PQnotifies(handle) {
            channels.append(String(cString: n.pointee.relname))
            PQfreemem(n)
        }
        return channels
    }

    /// Runs `body` on this connection's thread without the async hop, for the listener thread.
    func sync<T>(_ body: () throws -> T) rethrows -> T {
        try queue.sync { try body() }
    }

    // MARK: Private

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await Blocking.run(on: queue, body)
    }

    private func ensureConnected() throws {
        if let h = handle, PQstatus(h) == CONNECTION_OK { return }
        if let h = handle { PQfinish(h) }
        handle = PQconnectdb(conninfo)
        guard let h = handle, PQstatus(h) == CONNECTION_OK else {
            let message = errorMessage()
            if let h = handle { PQfinish(h) }
            handle = nil
            throw DatabaseError(message: "cannot connect: \(message)", connectionLost: true)
        }
        // Keep server notices (e.g. "schema already exists") off standard error.
        PQsetNoticeProcessor(h, { _, _ in }, nil)
    }

    private func errorMessage() -> String {
        guard let h = handle, let m = PQerrorMessage(h) else { return "no connection" }
        return String(cString: m).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func check(_ result: OpaquePointer?) throws {
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY else {
            let message: String
            if let result, let m = PQresultErrorMessage(result), m.pointee != 0 {
                message = String(cString: m).trimmingCharacters(in: .whitespacesAndNewlines)
            } else {
                message = errorMessage()
            }
            let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
            let lost = handle.map { PQstatus($0) != CONNECTION_OK } ?? true
            throw DatabaseError(message: message, sqlState: state, connectionLost: lost)
        }
    }

    private func rows(of result: OpaquePointer?) -> PGRows {
        guard let result else { return PGRows(columns: [], rows: [], affected: 0) }
        let nf = PQnfields(result), nt = PQntuples(result)
        let columns = (0..<nf).map { String(cString: PQfname(result, $0)) }
        var rows: [[String?]] = []
        rows.reserveCapacity(Int(nt))
        for r in 0..<nt {
            rows.append((0..<nf).map { f in
                PQgetisnull(result, r, f) == 1 ? nil : String(cString: PQgetvalue(result, r, f))
            })
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? Int(nt)
        return PGRows(columns: columns, rows: rows, affected: affected)
    }
}

/// Calls `body` with a C array of C strings (NULL for nil) that lives for the call.
private func withCStrings<R>(_ values: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let duplicated: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0) } ?? nil }
    defer { duplicated.forEach { free($0) } }
    let constant = duplicated.map { UnsafePointer($0) }
    return constant.withUnsafeBufferPointer { body($0.baseAddress) }
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
        "{" + items.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }.joined(separator: ",") + "}"
    }
}
