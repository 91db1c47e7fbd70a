import Foundation
import HalcyonQueue

/// Checks a module's query files against its `Query` types: the tests of the queue's files, the
/// bench's and the backlog's share them.
public enum QueryChecks {
    /// The type OIDs a parameter of each kind may be prepared as (text: text, varchar, name, unknown).
    public static let acceptedTypes: [QueryParameters.Kind: Set<UInt32>] = [
        .text: [25, 1043, 19, 705], .integer: [20, 21, 23], .float: [700, 701, 1700], .boolean: [16], .timestamp: [1184],
        .json: [3802, 114], .textArray: [1009], .integerArray: [1005, 1007, 1016],
    ]

    /// What disagrees between `library` and `samples` (one call of each statement): a statement
    /// with no `Query` type or two, a type naming none, a slot without a value.
    public static func declarationProblems(_ samples: [any Query], library: QueryLibrary) -> [String] {
        let declared = samples.map { type(of: $0).name }
        var problems: [String] = []
        for name in Set(declared) where declared.filter({ $0 == name }).count > 1 { problems.append("\(name): declared twice") }
        for name in Set(library.statements.keys).subtracting(declared).sorted() { problems.append("\(name): no Query type") }
        for name in Set(declared).subtracting(library.statements.keys).sorted() { problems.append("\(name): no such statement") }
        for sample in samples where library.statements[type(of: sample).name] != nil {
            if Set(type(of: sample).statement.slots) != Set(sample.slots.keys) { problems.append("\(type(of: sample).name): slots without a value") }
        }
        return problems
    }

    /// What disagrees between a module's embedded query `files` and its Swift side: a file that
    /// does not parse, a `.sql` file of `Sources/<module>/Queries` that is not embedded (or one
    /// embedded that is not there), and `declarationProblems`.
    public static func fileProblems(
        _ samples: [any Query], library: QueryLibrary, files: [(name: String, bytes: [UInt8])], module: String
    ) throws -> [String] {
        // This file is Tests/HalcyonTestSupport/QueryChecks.swift.
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/\(module)/Queries")
        var problems: [String] = []
        if try QueryLibrary.parse(files).count != library.statements.count { problems.append("the library is not its files' statements") }
        let onDisk = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") })
        if onDisk != Set(files.map(\.name)) { problems.append("\(directory.path) holds \(onDisk.sorted()), embedded: \(files.map(\.name))") }
        return problems + declarationProblems(samples, library: library)
    }

    /// Prepares each sample's statement on `connection` (`PQprepare`, `PQdescribePrepared`) and
    /// returns what disagrees: its parameter count and types against what its `bind` writes, its
    /// result's columns against its row type's (`rowProblems`).
    public static func preparedProblems(_ samples: [any Query], on connection: PGConnection) async throws -> [String] {
        let catalog = try await TypeCatalog.read(connection)
        var problems: [String] = []
        for sample in samples {
            let name = type(of: sample).name
            let described = try await connection.describe(sample.text)
            let parameters = sample.parameters
            if described.parameterTypes.count != parameters.values.count {
                problems.append("\(name): writes \(parameters.values.count) parameters, prepared with \(described.parameterTypes.count)")
            }
            for (index, (type, kind)) in zip(described.parameterTypes, parameters.kinds).enumerated()
            where acceptedTypes[kind]?.contains(type) != true {
                problems.append("\(name): $\(index + 1) is written as \(kind), prepared as type \(type)")
            }
            let columns = rowColumns(of: sample)
            if described.columns != columns {
                problems.append("\(name): returns \(described.columns), its row type reads \(columns)")
            } else {
                let types = described.columnTypes.map(catalog.type)
                let words = catalog.enumLabels + literals(in: sample.text)
                problems += rowProblems(of: sample, columns: columns, types: types, words: words).map { "\(name): \($0)" }
            }
        }
        return problems
    }

    /// A result column's type, as `pg_type` names it.
    public struct ColumnType: Sendable, Equatable {
        public var name: String
        /// `pg_type.typtype`: `e` for an enum.
        public var kind: String

        public init(name: String, kind: String = "b") {
            self.name = name
            self.kind = kind
        }
    }

    /// The types and enum labels of a database, by OID.
    public struct TypeCatalog: Sendable {
        var types: [UInt32: ColumnType]
        /// Every enum's labels (sample values for text columns a row reads as an enum).
        var enumLabels: [String]

        static func read(_ connection: PGConnection) async throws -> TypeCatalog {
            var types: [UInt32: ColumnType] = [:]
            for row in try await connection.execute("SELECT oid::int8, typname::text, typtype::text FROM pg_type").rows {
                if let oid = row[0].flatMap({ UInt32($0) }), let name = row[1], let kind = row[2] { types[oid] = ColumnType(name: name, kind: kind) }
            }
            let labels = try await connection.execute("SELECT enumlabel::text FROM pg_enum ORDER BY enumtypid, enumsortorder").rows
            return TypeCatalog(types: types, enumLabels: labels.compactMap { $0[0] })
        }

        func type(_ oid: UInt32) -> ColumnType { types[oid] ?? ColumnType(name: "oid \(oid)", kind: "?") }
    }

    /// The result column types (`pg_type.typname`) a column read as each kind may have: text is
    /// text or an enum; JSON is json, jsonb or text (`::text`); a float may be any number.
    public static let acceptedColumnTypes: [QueryParameters.Kind: Set<String>] = [
        .text: ["text", "varchar", "name", "bpchar"], .integer: ["int2", "int4", "int8"],
        .float: ["float4", "float8", "numeric", "int2", "int4", "int8"], .boolean: ["bool"], .timestamp: ["timestamptz"],
        .json: ["json", "jsonb", "text"], .textArray: ["_text", "_varchar", "_name"], .integerArray: ["_int2", "_int4", "_int8"],
    ]

    static func accepts(_ kind: QueryParameters.Kind, _ type: ColumnType) -> Bool {
        acceptedColumnTypes[kind]?.contains(type.name) == true || (kind == .text && type.kind == "e")
    }

    /// The string literals of a statement (`'live'`): sample values of its text columns, which a
    /// row type may read as one of a few words. An apostrophe in a `--` comment starts none.
    static func literals(in sql: String) -> [String] {
        var literals: [String] = []
        var current: String?
        var chars = sql.makeIterator()
        var previous: Character?
        while let c = chars.next() {
            if let literal = current {
                if c == "'" { literals.append(literal) }
                current = c == "'" ? nil : literal + String(c)
            } else if c == "'" {
                current = ""
            } else if c == "-", previous == "-" {
                while let skipped = chars.next(), skipped != "\n" {}
                previous = nil
                continue
            }
            previous = c
        }
        return literals
    }

    /// Values of a column of `type` for a trial row, as PostgreSQL writes them: the first for
    /// every column, the others (and NULL) one column at a time. A text column's are `words`
    /// (the database's enum labels, the statement's literals), then two others.
    static func sampleValues(_ type: ColumnType, words: [String]) -> [String] {
        switch type.name {
        case "int2", "int4", "int8": ["7", "3"]
        case "float4", "float8", "numeric": ["7.5", "3.25"]
        case "bool": ["t", "f"]
        case "timestamptz": ["2026-01-02 03:04:05.123456+00", "2026-02-03 04:05:06+00"]
        case "json", "jsonb": [#"{"a": "1"}"#, #"{"b": "2"}"#]
        case "_text", "_varchar", "_name": ["{a,b}", "{c}"]
        case "_int2", "_int4", "_int8": ["{1,2}", "{3}"]
        default: words + ["a", "b"]
        }
    }

    /// What disagrees between a result of `columns` of `types` and `query`'s row type, found by
    /// decoding trial rows (`RowReader.trial`): a column never read, one read as a kind its type
    /// is not (`acceptedColumnTypes`), one whose value never reaches the decoded row (NULL and
    /// every other sample value decode as the first does — e.g. a `JobRow` column the row type
    /// ignores).
    public static func rowProblems<Row: QueryRow>(_ row: Row.Type, columns: [String], types: [ColumnType], words: [String]) -> [String] {
        guard !columns.isEmpty else { return [] }
        var samples = types.map { sampleValues($0, words: words) }
        // A text column read as JSON (`::text`) gets JSON.
        let json = sampleValues(ColumnType(name: "jsonb"), words: words)
        let kinds = RowReader.trial(Row.self, columns: columns, values: samples.map(\.first)).reads
        for (index, column) in columns.enumerated() where kinds[column]?.contains(.json) == true { samples[index] = json }
        let first = samples.map(\.first)
        let trial = RowReader.trial(Row.self, columns: columns, values: first)
        var reads = trial.reads
        let decoded = String(reflecting: trial.row)
        var unreached: Set<String> = []
        for (index, column) in columns.enumerated() {
            var reaches = false
            for other in [nil] + samples[index].dropFirst().map(Optional.some) {
                var values = first
                values[index] = other
                let changed = RowReader.trial(Row.self, columns: columns, values: values)
                reads.merge(changed.reads) { $0.union($1) }
                if String(reflecting: changed.row) != decoded { reaches = true }
            }
            if !reaches { unreached.insert(column) }
        }
        var problems = Row.unread.subtracting(columns).sorted().map {
            "\(String(reflecting: Row.self)).unread names \($0), not a column of the result"
        }
        for (column, type) in zip(columns, types) where !Row.unread.contains(column) {
            guard let kinds = reads[column] else {
                problems.append("column \(column) is never read")
                continue
            }
            for kind in kinds.sorted(by: { $0.rawValue < $1.rawValue }) where !accepts(kind, type) {
                problems.append("column \(column) is read as \(kind), returned as \(type.name)")
            }
            if unreached.contains(column) { problems.append("column \(column) is read, but its value never reaches \(String(reflecting: Row.self))") }
        }
        return problems
    }

    /// `preparedProblems` on a fresh migrated database.
    public static func preparedProblems(_ samples: [any Query]) async throws -> [String] {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        let problems: Result<[String], any Error>
        do { problems = .success(try await preparedProblems(samples, on: c)) } catch { problems = .failure(error) }
        await c.close()
        try? await db.drop()
        return try problems.get()
    }

    static func rowColumns<Q: Query>(of query: Q) -> [String] { Q.Row.columns }

    static func rowProblems<Q: Query>(of query: Q, columns: [String], types: [ColumnType], words: [String]) -> [String] {
        rowProblems(Q.Row.self, columns: columns, types: types, words: words)
    }
}
