/// Reads a step's arguments the way every processor does: positional ones in order, named
/// ones by key, and an error (with its column) for anything missing, unknown or ill-typed.
struct StepArguments {
    let step: ChainStep
    private var positional: [ChainArgument]
    private var named: [String: ChainArgument]

    init(_ step: ChainStep, keys: Set<String>) throws(ChainError) {
        self.step = step
        positional = step.arguments.filter { $0.key == nil }
        named = [:]
        for a in step.arguments {
            guard let key = a.key else { continue }
            guard keys.contains(key) else {
                throw ChainError(
                    position: a.position, found: "'\(key)'",
                    expected: keys.isEmpty
                        ? "no named arguments for '\(step.name)'" : "one of \(keys.sorted().joined(separator: ", ")) for '\(step.name)'")
            }
            guard named[key] == nil else { throw ChainError(position: a.position, found: "'\(key)' again", expected: "each argument once") }
            named[key] = a
        }
    }

    /// The next positional argument, or the named one with `key` (either spelling works).
    mutating func take(_ key: String) -> ChainArgument? {
        if let a = named.removeValue(forKey: key) { return a }
        return positional.isEmpty ? nil : positional.removeFirst()
    }

    /// The word `take(key)` would return, without taking it; nil when that argument is absent
    /// or not a word.
    func peekWord(_ key: String) -> String? {
        guard case .word(let w)? = (named[key] ?? positional.first)?.value else { return nil }
        return w
    }

    /// A list of choices written `a|b|c`: each once, returned in the order of `allowed` (or, with
    /// `asWritten`, in the order written: where the order means something).
    mutating func choices<T: RawRepresentable<String> & Equatable>(
        _ key: String, allowed: [T], default value: [T], asWritten: Bool = false
    )
        throws(ChainError) -> [T]
    {
        guard let a = take(key) else { return value }
        let options = allowed.map(\.rawValue).joined(separator: ", ")
        guard case .word(let text) = a.value else {
            throw ChainError(
                position: a.valuePosition, found: "'\(a.value)'",
                expected: "a list such as \(allowed.map(\.rawValue).joined(separator: "|")) for '\(key)'")
        }
        let names = text.split(separator: "|").map(String.init)
        for name in names where !allowed.contains(where: { $0.rawValue == name }) {
            throw ChainError(position: a.valuePosition, found: "'\(name)'", expected: "\(options) in '\(key)'")
        }
        guard Set(names).count == names.count else {
            throw ChainError(position: a.valuePosition, found: "'\(text)'", expected: "each of '\(key)' once")
        }
        return asWritten ? names.compactMap { name in allowed.first { $0.rawValue == name } } : allowed.filter { names.contains($0.rawValue) }
    }

    mutating func size(_ key: String, max limit: Int = 16384) throws(ChainError) -> (Int, Int) {
        guard let a = take(key) else { throw missing(key, "a size WxH") }
        guard case .size(let w, let h) = a.value else {
            throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "a size WxH for '\(key)'")
        }
        guard (1...limit).contains(w), (1...limit).contains(h) else {
            throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "a size from 1x1 to \(limit)x\(limit)")
        }
        return (w, h)
    }

    mutating func number(_ key: String, default value: Double? = nil, range: ClosedRange<Double>) throws(ChainError) -> Double {
        guard let a = take(key) else {
            if let value { return value }
            throw missing(key, "a number")
        }
        guard case .number(let n) = a.value else {
            throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "a number for '\(key)'")
        }
        guard range.contains(n) else {
            throw ChainError(
                position: a.valuePosition, found: "'\(a.value)'",
                expected: "'\(key)' from \(formatNumber(range.lowerBound)) to \(formatNumber(range.upperBound))")
        }
        return n
    }

    /// A length in pixels, or with `%` a percentage (of whatever the step says).
    mutating func length(
        _ key: String, pixels: ClosedRange<Double>, percent: ClosedRange<Double>
    ) throws(ChainError) -> (value: Double, isPercent: Bool) {
        guard let a = take(key) else { throw missing(key, "a number of pixels or a percentage") }
        switch a.value {
        case .number(let n) where pixels.contains(n): return (n, false)
        case .percent(let p) where percent.contains(p): return (p, true)
        case .number, .percent:
            throw ChainError(
                position: a.valuePosition, found: "'\(a.value)'",
                expected:
                    "'\(key)' from \(formatNumber(pixels.lowerBound)) to \(formatNumber(pixels.upperBound)) px or \(formatNumber(percent.lowerBound))% to \(formatNumber(percent.upperBound))%"
            )
        default:
            throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "a number of pixels or a percentage for '\(key)'")
        }
    }

    mutating func choice<T: RawRepresentable<String> & CaseIterable>(_ key: String, default value: T? = nil) throws(ChainError) -> T {
        let options = T.allCases.map(\.rawValue).joined(separator: "|")
        guard let a = take(key) else {
            if let value { return value }
            throw missing(key, options)
        }
        guard case .word(let w) = a.value, let v = T(rawValue: w) else {
            throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "\(options) for '\(key)'")
        }
        return v
    }

    mutating func color(_ key: String, default value: Color? = nil) throws(ChainError) -> Color {
        guard let a = take(key) else {
            if let value { return value }
            throw missing(key, "a colour")
        }
        guard let c = Color(a.value) else {
            throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "a colour #RRGGBB, #RRGGBBAA or a CSS name for '\(key)'")
        }
        return c
    }

    /// A colour, or `none`.
    mutating func optionalColor(_ key: String) throws(ChainError) -> Color? {
        if let a = named[key] ?? positional.first, a.value == .word("none") {
            _ = take(key)
            return nil
        }
        guard named[key] != nil || !positional.isEmpty else { return nil }
        return try color(key)
    }

    mutating func bool(_ key: String, default value: Bool) throws(ChainError) -> Bool {
        guard let a = take(key) else { return value }
        switch a.value {
        case .word("true"), .word("yes"), .number(1): return true
        case .word("false"), .word("no"), .number(0): return false
        default: throw ChainError(position: a.valuePosition, found: "'\(a.value)'", expected: "true or false for '\(key)'")
        }
    }

    /// Call last: any argument left over is an error.
    func finish() throws(ChainError) {
        if let extra = positional.first ?? named.values.min(by: { $0.position < $1.position }) {
            throw ChainError(position: extra.position, found: "'\(extra.value)'", expected: "no more arguments for '\(step.name)'")
        }
    }

    private func missing(_ key: String, _ what: String) -> ChainError {
        ChainError(position: step.position, found: "'\(step.name)' without '\(key)'", expected: "\(what) for '\(key)'")
    }
}
