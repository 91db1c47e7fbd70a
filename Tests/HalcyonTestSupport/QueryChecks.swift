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
    /// result's columns against its row type's.
    public static func preparedProblems(_ samples: [any Query], on connection: PGConnection) async throws -> [String] {
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
            if described.columns != columns { problems.append("\(name): returns \(described.columns), its row type reads \(columns)") }
        }
        return problems
    }

    /// `preparedProblems` on a fresh migrated database.
    public static func preparedProblems(_ samples: [any Query]) async throws -> [String] {
        let db = try await TestDatabase.create()
        let c = try await db.connect()
        defer { Task { await c.close() } }
        return try await preparedProblems(samples, on: c)
    }

    static func rowColumns<Q: Query>(of query: Q) -> [String] { Q.Row.columns }
}
