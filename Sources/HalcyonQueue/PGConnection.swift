import CLibPQ
import Dispatch
import Foundation
import HalcyonDomain
import HalcyonRuntime
import Synchronization

/// One libpq connection. It is owned by a thread of its own (`SerialThread`): every libpq call
/// runs there, off Swift's cooperative pool, never on two threads at once, and never waiting
/// for a free thread behind image work. A dropped connection is
/// re-established on the next call; the failing call throws with `connectionLost`.
///
/// Every connection is opened with libpq's `connect_timeout` and TCP keepalives (including
/// `tcp_user_timeout`), unless the connection string sets them itself, so a dead peer is
/// noticed. With a `statementTimeout`, every statement also has a deadline kept by the client:
/// past it the statement is cancelled (`PQcancel`, from a thread of its own), the connection
/// is dropped and the call throws a transient error (SQLSTATE 57014) — a half-open connection
/// or a statement stuck behind someone's lock cannot hang the caller. Client-side, so it works
/// behind PgBouncer too.
///
/// Every statement that starts a transaction is sent after its `StatementSettings` (`jit = off`)
/// in one pipeline: the settings hold for that transaction only and cost no round trip.
///
/// A connection opened with `preparing: true` sends each planned statement as a named prepared
/// statement (`PreparedStatements`): parsed once per session, and planned once when PostgreSQL
/// finds its generic plan as good as a custom one — the worker's claim spends ~3 ms planning and
/// under 1 ms running. Not for connections through a pooler in transaction mode, whose server
/// sessions change under the client (`halcyon work --poll-only` turns it off).
public final class PGConnection: @unchecked Sendable {
    /// libpq connection string or URI; empty means the standard `PG*` variables. Never shown:
    /// `Redaction.conninfo` masks its passwords.
    public let conninfo: String
    /// The passwords `conninfo` holds, masked in every message this connection reports (libpq's
    /// own quote the connection string: a URI it cannot parse, a percent-encoded token).
    private let secrets: [String]
    /// Seconds a statement may take before it is cancelled and the connection reset; nil for
    /// no deadline (migrations, an operator's commands).
    public let statementTimeout: Double?
    private let thread: SerialThread
    private var handle: OpaquePointer?  // touched only on `thread`
    /// Raised by `abandon()` from any thread: a statement waiting for its result is cancelled
    /// at once, as if its deadline had passed, and so is every later one on this connection.
    private let abandoned = Atomic<Bool>(false)
    /// The last failed connection attempt: statements queued behind it fail at once for a
    /// moment instead of each waiting out its own connect timeout.
    private var lastConnectFailure: (at: ContinuousClock.Instant, error: DatabaseError)?  // touched only on `thread`
    static let reconnectPause: Duration = .seconds(1)

    /// What every connection gets unless its connection string says otherwise: give up
    /// connecting after 5 s; probe an idle TCP connection after 30 s, every 10 s, 3 times;
    /// drop one whose sent data stays unacknowledged for 60 s.
    static let connectionDefaults: [(keyword: String, value: String, environment: String?)] = [
        ("connect_timeout", "5", "PGCONNECT_TIMEOUT"), ("keepalives", "1", nil), ("keepalives_idle", "30", nil),
        ("keepalives_interval", "10", nil), ("keepalives_count", "3", nil), ("tcp_user_timeout", "60000", nil),
    ]

    /// Applied to every statement this connection sends, transaction-locally and in the same
    /// round trip (`StatementSettings`).
    public let settings: StatementSettings
    private let settingsPrefix: String?
    /// The statements prepared on this session; nil when this connection prepares none.
    private var prepared: PreparedStatements?  // touched only on `thread`

    private init(conninfo: String, label: String, statementTimeout: Double?, settings: StatementSettings, preparing: Bool = false) {
        self.conninfo = conninfo
        self.prepared = preparing ? PreparedStatements() : nil
        self.secrets = Redaction.conninfoSecrets(conninfo).sorted { $0.count > $1.count }
        self.statementTimeout = statementTimeout.flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
        self.settings = settings
        self.settingsPrefix = settings.prefix
        self.thread = SerialThread(name: "halcyon.pg.\(label)")
    }

    deinit {
        if let handle { PQfinish(handle) }
        thread.finish()
    }

    /// Opens a connection; `statementTimeout` (seconds) gives every statement a deadline;
    /// `preparing` sends planned statements as named prepared statements (a session of its own
    /// needed: not through a pooler in transaction mode).
    public static func connect(
        _ conninfo: String, label: String = "main", statementTimeout: Double? = nil, settings: StatementSettings = .halcyon,
        preparing: Bool = false
    ) async throws -> PGConnection {
        let c = PGConnection(conninfo: conninfo, label: label, statementTimeout: statementTimeout, settings: settings, preparing: preparing)
        try await c.onQueue { try c.ensureConnected() }
        return c
    }

    /// Opens a connection from a thread that may block (not the cooperative pool).
    public static func connectBlocking(_ conninfo: String, label: String) throws -> PGConnection {
        let c = PGConnection(conninfo: conninfo, label: label, statementTimeout: nil, settings: .halcyon)
        try c.sync { try c.ensureConnected() }
        return c
    }

    /// Runs one statement with text parameters (`$1`, `$2`, …) and returns its rows.
    /// `timeout` overrides the connection's statement timeout for this statement (`.infinity`:
    /// none, e.g. waiting for an advisory lock).
    @discardableResult
    public func execute(_ sql: String, _ params: [String?] = [], timeout: Double? = nil) async throws -> PGRows {
        try await onQueue { try self.executeLocked(sql, params, timeout: timeout) }
    }

    /// What the server makes of a statement, without running it: its parameters' types (OIDs) and
    /// its result's column names.
    public struct Description: Sendable, Equatable {
        public var parameterTypes: [UInt32]
        public var columns: [String]
        /// Each result column's type OID (`PQftype`), in the order of `columns`.
        public var columnTypes: [UInt32]
    }

    /// Prepares `sql` as the unnamed statement (`PQprepare`) and describes it
    /// (`PQdescribePrepared`): how the tests check the query files against PostgreSQL.
    public func describe(_ sql: String) async throws -> Description {
        try await onQueue {
            try self.ensureConnected()
            let prepared = PQprepare(self.handle, "", sql, 0, nil)
            defer { PQclear(prepared) }
            try self.check(prepared)
            let described = PQdescribePrepared(self.handle, "")
            defer { PQclear(described) }
            try self.check(described)
            return Description(
                parameterTypes: (0..<PQnparams(described)).map { UInt32(PQparamtype(described, $0)) },
                columns: (0..<PQnfields(described)).map { String(cString: PQfname(described, $0)) },
                columnTypes: (0..<PQnfields(described)).map { UInt32(PQftype(described, $0)) })
        }
    }

    /// Runs several statements (no parameters) in one round trip, e.g. a migration file.
    public func executeScript(_ sql: String) async throws {
        try await onQueue { try self.executeScriptLocked(sql) }
    }

    /// `executeScript` for use inside `withLocked`.
    public func executeScriptLocked(_ sql: String) throws {
        precondition(thread.isCurrent, "a libpq call off its connection's thread")
        try ensureConnected()
        // A multi-statement string runs as one transaction unless it says otherwise: the
        // settings, first, hold for all of it.
        let text = startsTransaction && StatementSettings.applies(to: sql) ? settingsPrefix.map { $0 + ";\n" + sql } ?? sql : sql
        let result = PQexec(handle, text)
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
    public func executeLocked(_ sql: String, _ params: [String?] = [], timeout: Double? = nil) throws -> PGRows {
        precondition(thread.isCurrent, "a libpq call off its connection's thread")
        if abandoned.load(ordering: .relaxed) {
            throw DatabaseError(message: "statement not sent: the connection was abandoned (its caller is stopping)", connectionLost: true)
        }
        try ensureConnected()
        let seconds = (timeout ?? statementTimeout).flatMap { $0.isFinite && $0 > 0 ? $0 : nil }
        let result = try run(sql, params, within: seconds)
        defer { PQclear(result) }
        try check(result)
        return rows(of: result)
    }

    /// Whether the next statement starts a transaction (none is open): only then are the
    /// settings sent with it. Inside a transaction block they hold from its `BEGIN` on, and
    /// in a failed block nothing but its `ROLLBACK` may run.
    private var startsTransaction: Bool {
        handle.map { PQtransactionStatus($0) == PQTRANS_IDLE } ?? false
    }

    /// Sends the statement — after the settings, in one pipeline and one transaction, when it
    /// starts a transaction — and waits for its result on the socket, at most `seconds` (nil:
    /// no deadline). A failure of the settings is reported as the statement's.
    ///
    /// On a preparing connection the settings and the statement go as named prepared
    /// statements, each parsed (in the same pipeline) the first time this session sends it. A
    /// server that has lost them, or has them already (a pooler handing the client another
    /// server session), answers 26000 or 42P05 before anything ran: the connection stops
    /// preparing for good and, when no transaction block was open, sends the statement again
    /// unprepared.
    private func run(_ sql: String, _ params: [String?], within seconds: Double?) throws -> OpaquePointer? {
        let idle = startsTransaction
        let result = try send(sql, params, idle: idle, within: seconds)
        guard prepared != nil, let state = Self.sqlState(result), PreparedStatements.sessionMismatch.contains(state) else { return result }
        prepared = nil
        guard idle else { return result }
        PQclear(result)
        return try send(sql, params, idle: idle, within: seconds)
    }

    /// One statement (and the settings before it when `idle`), in one pipeline when more than
    /// one message goes; its result, or the first failure before it.
    private func send(_ sql: String, _ params: [String?], idle: Bool, within seconds: Double?) throws -> OpaquePointer? {
        guard let h = handle else { throw DatabaseError(message: "not connected", connectionLost: true) }
        let end = seconds.map { ContinuousClock.now + .seconds($0) }
        let prefix = idle && StatementSettings.applies(to: sql) ? settingsPrefix : nil
        // Each statement to send, and the prepared statement it goes as (nil: unnamed).
        let steps: [(sql: String, params: [String?], name: String?)] =
            (prefix.map { [($0, [], prepared?.name(for: $0))] } ?? []) + [(sql, params, prepared?.name(for: sql))]
        let parses = steps.map { step in step.name.map { !(prepared?.contains($0) ?? true) } ?? false }
        let pipelined = steps.count > 1 || parses.contains(true)
        // A pipeline that cannot be sent whole leaves the connection mid-pipeline: it is dropped
        // (the next call reconnects) rather than reused.
        if pipelined { guard PQenterPipelineMode(h) == 1 else { throw lost() } }
        for (step, parse) in zip(steps, parses) {
            if parse, let name = step.name {
                guard PQsendPrepare(h, name, step.sql, 0, nil) == 1 else { throw pipelined ? lost() : failedToSend(h) }
            }
            let sent = withCStrings(step.params) { values in
                step.name.map { PQsendQueryPrepared(h, $0, Int32(step.params.count), values, nil, nil, 0) }
                    ?? PQsendQueryParams(h, step.sql, Int32(step.params.count), nil, values, nil, nil, 0)
            }
            guard sent == 1 else { throw pipelined ? lost() : failedToSend(h) }
        }
        if pipelined { guard PQpipelineSync(h) == 1 else { throw lost() } }
        while true {
            let f = PQflush(h)
            if f == 0 { break }
            if f < 0 { throw lost() }
            guard waitForSocket(h, events: Int16(POLLIN | POLLOUT), until: end) else { throw timedOut(after: seconds ?? 0) }
            if PQconsumeInput(h) == 0 { throw lost() }
        }
        guard pipelined else { return try collect(h, until: end, seconds) }
        // Every message's result in order: a parse's, then its statement's.
        var results: [OpaquePointer?] = []
        defer { results.forEach { PQclear($0) } }
        for (step, parse) in zip(steps, parses) {
            if parse {
                let parsed = try collect(h, until: end, seconds)
                if let name = step.name, parsed.map(PQresultStatus) == PGRES_COMMAND_OK { prepared?.insert(name) }
                results.append(parsed)
            }
            results.append(try collect(h, until: end, seconds))
        }
        // The pipeline's end: its sync point, after which it may be left.
        let sync = try nextResult(h, until: end, seconds)
        let synced = sync.map { PQresultStatus($0) == PGRES_PIPELINE_SYNC } ?? false
        PQclear(sync)
        guard synced, PQexitPipelineMode(h) == 1 else { throw lost() }
        // The first failure (what aborted the rest), else the statement's own result.
        let index = results.firstIndex { $0.map(PQresultStatus) == PGRES_FATAL_ERROR } ?? results.count - 1
        let chosen = results[index]
        results[index] = nil
        return chosen
    }

    private func failedToSend(_ h: OpaquePointer) -> DatabaseError {
        DatabaseError(message: errorMessage(), connectionLost: PQstatus(h) != CONNECTION_OK)
    }

    /// A failed result's SQLSTATE.
    private static func sqlState(_ result: OpaquePointer?) -> String? {
        guard let result, PQresultStatus(result) == PGRES_FATAL_ERROR else { return nil }
        return PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
    }

    /// The results of one statement, up to libpq's end-of-statement marker: the first, or an
    /// error that came after it.
    private func collect(_ h: OpaquePointer, until end: ContinuousClock.Instant?, _ seconds: Double?) throws -> OpaquePointer? {
        var result: OpaquePointer?
        while true {
            let next: OpaquePointer?
            do {
                next = try nextResult(h, until: end, seconds)
            } catch {
                PQclear(result)
                throw error
            }
            guard let next else { break }
            if result == nil || PQresultStatus(next) == PGRES_FATAL_ERROR {
                PQclear(result)
                result = next
            } else {
                PQclear(next)
            }
        }
        return result
    }

    /// `PQgetResult` once the connection is not busy, waiting on the socket until `end`.
    private func nextResult(_ h: OpaquePointer, until end: ContinuousClock.Instant?, _ seconds: Double?) throws -> OpaquePointer? {
        while PQisBusy(h) == 1 {
            guard waitForSocket(h, events: Int16(POLLIN), until: end) else { throw timedOut(after: seconds ?? 0) }
            if PQconsumeInput(h) == 0 { throw lost() }
        }
        return PQgetResult(h)
    }

    /// Polls the connection's socket for `events` until `end` (nil: for ever); false on timeout
    /// or once the connection is abandoned (looked at every quarter of a second).
    private func waitForSocket(_ h: OpaquePointer, events: Int16, until end: ContinuousClock.Instant?) -> Bool {
        while true {
            let left = end.map { $0 - ContinuousClock.now } ?? .seconds(60)
            guard left > .zero, !abandoned.load(ordering: .relaxed) else { return false }
            var pfd = pollfd(fd: PQsocket(h), events: events, revents: 0)
            let ms = Int32(min(left.seconds * 1000, 250).rounded(.up))
            let n = poll(&pfd, 1, max(1, ms))
            if n > 0 { return true }
            if n < 0 && errno != EINTR { return true }  // let libpq see and report the error
        }
    }

    private func lost() -> DatabaseError {
        let message = errorMessage()
        if let h = handle { PQfinish(h) }
        handle = nil
        return DatabaseError(message: message, connectionLost: true)
    }

    /// Cancels the statement this connection is waiting for, from any thread (its owner is
    /// stopping: a long statement need not run to its end), and every later one: each fails at
    /// once with a transient error and the connection is dropped. The server rolls back.
    public func abandon() {
        abandoned.store(true, ordering: .relaxed)
    }

    /// Past the deadline, or abandoned: ask the server to cancel (from another thread:
    /// `PQcancel` opens a connection of its own and could block), drop this connection, report a
    /// transient error.
    private func timedOut(after seconds: Double) -> DatabaseError {
        if let h = handle {
            if let cancel = PQgetCancel(h) {
                let box = CancelBox(cancel)
                Thread.detachNewThread {
                    var buffer = [CChar](repeating: 0, count: 256)
                    _ = PQcancel(box.cancel, &buffer, 256)
                    PQfreeCancel(box.cancel)
                }
            }
            PQfinish(h)
        }
        handle = nil
        if abandoned.load(ordering: .relaxed) {
            return DatabaseError(message: "statement abandoned (its caller is stopping); cancelled and the connection closed", connectionLost: true)
        }
        return DatabaseError(
            message: "statement timed out after \(TimeSpan.format(seconds)); cancelled and the connection reset",
            sqlState: DatabaseError.timedOutState, connectionLost: true)
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

    /// Reads whatever arrived on the socket and returns the notifications' payloads.
    func consumeNotificationsLocked() throws -> [String] {
        guard let handle else { throw DatabaseError(message: "not connected", connectionLost: true) }
        if PQconsumeInput(handle) == 0 || PQstatus(handle) != CONNECTION_OK {
            throw DatabaseError(message: errorMessage(), connectionLost: true)
        }
        var payloads: [String] = []
        while let n = PQnotifies(handle) {
            payloads.append(n.pointee.extra.map { String(cString: $0) } ?? "")
            PQfreemem(n)
        }
        return payloads
    }

    /// Runs `body` on this connection's thread without the async hop, for the listener thread.
    func sync<T>(_ body: @escaping () throws -> T) throws -> T {
        try thread.sync(body)
    }

    // MARK: Private

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await thread.run(body)
    }

    private func ensureConnected() throws {
        if let h = handle, PQstatus(h) == CONNECTION_OK { return }
        if let h = handle { PQfinish(h) }
        handle = nil
        if let failure = lastConnectFailure, ContinuousClock.now - failure.at < Self.reconnectPause { throw failure.error }
        handle = openConnection()
        guard let h = handle, PQstatus(h) == CONNECTION_OK else {
            let message = errorMessage()
            if let h = handle { PQfinish(h) }
            handle = nil
            let error = DatabaseError(message: "cannot connect: \(message)", connectionLost: true)
            lastConnectFailure = (ContinuousClock.now, error)
            throw error
        }
        lastConnectFailure = nil
        prepared?.removeAll()  // a new session has none
        // Keep server notices (e.g. "schema already exists") off standard error.
        PQsetNoticeProcessor(h, { _, _ in }, nil)
        // Non-blocking sends, so a deadline also covers writing a large statement.
        PQsetnonblocking(h, 1)
    }

    /// `PQconnectdbParams` with `connectionDefaults` first and the connection string last
    /// (expanded), so anything the string sets wins.
    private func openConnection() -> OpaquePointer? {
        let env = ProcessInfo.processInfo.environment
        var pairs = Self.connectionDefaults.filter { d in d.environment.map { env[$0] == nil } ?? true }.map { ($0.keyword, $0.value) }
        pairs.append(("dbname", conninfo))
        let keys = pairs.map { strdup($0.0) }, values = pairs.map { strdup($0.1) }
        defer { (keys + values).forEach { free($0) } }
        let k = keys.map { UnsafePointer($0) } + [nil], v = values.map { UnsafePointer($0) } + [nil]
        return k.withUnsafeBufferPointer { kp in v.withUnsafeBufferPointer { vp in PQconnectdbParams(kp.baseAddress, vp.baseAddress, 1) } }
    }

    private func errorMessage() -> String {
        guard let h = handle, let m = PQerrorMessage(h) else { return "no connection" }
        return shown(String(cString: m))
    }

    /// A message of libpq's or the server's as one line, without this connection's passwords.
    private func shown(_ message: String) -> String {
        var text = Self.oneLine(message)
        guard !secrets.isEmpty else { return text }
        // The connection string quoted whole (a URI libpq cannot parse), then each password: a
        // short one only where libpq quotes it, lest every "ab" of the message be masked.
        if conninfo.count > 1 { text = text.replacingOccurrences(of: conninfo, with: Redaction.conninfo(conninfo)) }
        for secret in secrets {
            if secret.count >= 4 {
                text = text.replacingOccurrences(of: secret, with: Redaction.mask)
            } else {
                text = text.replacingOccurrences(of: "\"\(secret)\"", with: "\"\(Redaction.mask)\"")
            }
        }
        return text
    }

    /// libpq's messages span lines: a hint indented under its line (`connection … failed:
    /// Connection refused` / `\tIs the server running …?`), one line per host tried, a server's
    /// `DETAIL:` and `HINT:`. One line: indented continuations joined with a space, the others
    /// with `; `.
    static func oneLine(_ message: String) -> String {
        var text = ""
        for line in message.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { continue }
            if !text.isEmpty { text += line.first!.isWhitespace ? " " : "; " }
            text += trimmed
        }
        return text
    }

    private func check(_ result: OpaquePointer?) throws {
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY else {
            let message: String
            if let result, let m = PQresultErrorMessage(result), m.pointee != 0 {
                message = shown(String(cString: m))
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
            rows.append(
                (0..<nf).map { f in
                    PQgetisnull(result, r, f) == 1 ? nil : String(cString: PQgetvalue(result, r, f))
                })
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? Int(nt)
        return PGRows(columns: columns, rows: rows, affected: affected)
    }
}

/// A `PGcancel` handed to the thread that sends the cancel request (and frees it).
private final class CancelBox: @unchecked Sendable {
    let cancel: OpaquePointer
    init(_ cancel: OpaquePointer) { self.cancel = cancel }
}

/// Calls `body` with a C array of C strings (NULL for nil) that lives for the call. A NUL
/// inside a value would cut it short there (C strings): it becomes U+FFFD instead.
private func withCStrings<R>(_ values: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let duplicated: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0.postgresSafe) } ?? nil }
    defer { duplicated.forEach { free($0) } }
    let constant = duplicated.map { UnsafePointer($0) }
    return constant.withUnsafeBufferPointer { body($0.baseAddress) }
}
