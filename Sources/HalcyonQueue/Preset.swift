import Foundation
import HalcyonRuntime

/// A row of `halcyon.presets`: a named chain, and job options it brings.
public struct Preset: Sendable, Equatable {
    public var name: String
    public var processors: String
    /// A JSON object; a job's own options win key by key.
    public var options: [String: JSONValue]

    public init(name: String, processors: String, options: [String: JSONValue] = [:]) {
        self.name = name
        self.processors = processors
        self.options = options
    }

    /// A preset name: a letter or `_`, then letters, digits or `_`, 64 at most (also a
    /// constraint on the table).
    public static func isValidName(_ name: String) -> Bool {
        let chars = Array(name.utf8)
        guard (1...64).contains(chars.count), let first = chars.first, first == UInt8(ascii: "_") || (0x61...0x7A).contains(first) else {
            return false
        }
        return chars.allSatisfy { $0 == UInt8(ascii: "_") || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }
    }

}

extension JobQueue {
    /// Adds or replaces a preset (the caller has validated its chain and options); true when new.
    @discardableResult
    public func setPreset(_ preset: Preset) async throws -> Bool {
        try await connection.row(SQL.SetPreset(preset: preset))?.created ?? false
    }

    public func presets() async throws -> [Preset] {
        try await connection.rows(SQL.ListPresets()).map(\.preset)
    }

    /// Deletes a preset; false when there was none by that name.
    public func deletePreset(named name: String) async throws -> Bool {
        try await connection.row(SQL.DeletePreset(name: name)) != nil
    }

    /// The presets named `names` (those that exist), read in one statement: what the chains of a
    /// claimed batch name, right after the claim. Nothing is read for no names.
    public func presets(named names: Set<String>) async throws -> [String: Preset] {
        guard !names.isEmpty else { return [:] }
        let rows = try await connection.rows(SQL.PresetsNamed(names: names.sorted()))
        return Dictionary(rows.map { ($0.preset.name, $0.preset) }, uniquingKeysWith: { a, _ in a })
    }
}
