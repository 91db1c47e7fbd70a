/// The named prepared statements one database session holds, for a `PGConnection` that
/// prepares (`preparing: true`).
///
/// A statement's name is made from its text (`halcyon_` and a 64-bit FNV-1a hash with the text's
/// length), so one name is one text in every process: a server session that already has the
/// name has the same statement. Only statements the planner plans are prepared, and at most
/// `capacity` of them per session: past that, statements go unnamed as before, so a caller that
/// built texts without end could not fill the server's memory (nor this process's: the texts it
/// remembers are as bounded).
struct PreparedStatements {
    /// Statements prepared per session, at most.
    static let capacity = 256

    /// SQLSTATEs that say the session's prepared statements are not what this connection
    /// thinks (a pooler switched sessions, or someone ran `DEALLOCATE`): 26000 (no such
    /// statement) and 42P05 (already there). Both come before the statement runs.
    static let sessionMismatch: Set<String> = ["26000", "42P05"]

    private var names: Set<String> = []
    /// The names worked out for texts this session has seen, so a statement sent again is not
    /// scanned and hashed again (a worker sends the same few texts all day), and those that go
    /// unnamed (nil). Bounded like the session's statements: at most `capacity` texts; past that
    /// a new text is worked out each time it is sent.
    private var known: [String: String?] = [:]

    /// The name `sql` goes under, or nil when it goes unnamed: not a planned statement, a
    /// transaction's `BEGIN`, or the session is full.
    mutating func name(for sql: String) -> String? {
        if let name = known[sql] { return name.flatMap { names.contains($0) || names.count < Self.capacity ? $0 : nil } }
        guard let word = StatementSettings.firstKeyword(of: sql), Self.prepared.contains(word) else {
            if known.count < Self.capacity { known[sql] = .some(nil) }
            return nil
        }
        let name = Self.name(of: sql)
        if known.count < Self.capacity { known[sql] = name }
        return names.contains(name) || names.count < Self.capacity ? name : nil
    }

    func contains(_ name: String) -> Bool { names.contains(name) }

    /// How many texts this session remembers the names of (at most `capacity`).
    var rememberedTexts: Int { known.count }

    mutating func insert(_ name: String) { names.insert(name) }

    mutating func removeAll() { names.removeAll() }

    /// What is prepared: the statements the settings go with, less a block's `BEGIN` and
    /// `EXPLAIN` (which prepares nothing worth keeping).
    private static let prepared = StatementSettings.planned.subtracting(["begin", "start", "explain"])

    /// `halcyon_<FNV-1a 64 of the UTF-8 text, hex>_<its length>`.
    static func name(of sql: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var length = 0
        for byte in sql.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            length += 1
        }
        return "halcyon_" + String(hash, radix: 16) + "_" + String(length)
    }
}
