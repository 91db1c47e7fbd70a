import HalcyonRuntime

/// One setting of a component's configuration, defined once beside it: the command-line option
/// that sets it, its default, the values it accepts and what it does. The configuration's
/// property defaults to `defaultValue`, its `validate()` calls `check`, and the command line's
/// option takes its default and help text from here — nothing copies them.
public struct Setting<Value: Comparable & Sendable>: Sendable {
    /// The option, e.g. `--lease` (also what error messages name).
    public let option: String
    public let defaultValue: Value
    /// The values accepted.
    public let range: ClosedRange<Value>
    /// A value accepted outside `range` that turns the feature off (`0s`), or nil.
    public let off: Value?
    /// What it does, a sentence without its range, e.g. "Lease per claimed job (renewed every lease/3)".
    public let meaning: String
    /// Sentences that follow the range in the help text, or nil.
    public let detail: String?
    /// The value as a user writes it (`30s`, `50MiB`, `8`).
    public let format: @Sendable (Value) -> String

    public init(
        _ option: String, default defaultValue: Value, _ range: ClosedRange<Value>, off: Value? = nil, _ meaning: String,
        detail: String? = nil, format: @escaping @Sendable (Value) -> String
    ) {
        self.detail = detail
        self.option = option
        self.defaultValue = defaultValue
        self.range = range
        self.off = off
        self.meaning = meaning
        self.format = format
    }

    /// The help text: its meaning, the values accepted, then its detail, e.g. "Lease per
    /// claimed job (renewed every lease/3), 1s–1d." (with "0s turns it off" when it can be).
    public var help: String {
        let values = "\(format(range.lowerBound))–\(format(range.upperBound))"
        let text = off.map { "\(meaning); \(format($0)) turns it off, else \(values)." } ?? "\(meaning), \(values)."
        return detail.map { "\(text) \($0)" } ?? text
    }

    /// Throws `job.invalid_options` naming the option and what it accepts, unless `value` is accepted.
    public func check(_ value: Value) throws(HalcyonError) {
        if range.contains(value) || value == off { return }
        let accepted = "\(format(range.lowerBound)) to \(format(range.upperBound))" + (off.map { " (or \(format($0)))" } ?? "")
        throw HalcyonError(.invalidOptions, "\(option) must be from \(accepted); got \(format(value))")
    }

    /// The same for an optional value (nil: not set, accepted).
    public func check(_ value: Value?) throws(HalcyonError) {
        if let value { try check(value) }
    }
}

extension Setting where Value == Duration {
    /// A duration, written `250ms`, `30s`, `10m`, `1d`.
    public static func duration(
        _ option: String, default defaultValue: Duration, _ range: ClosedRange<Duration>, off: Duration? = nil, _ meaning: String,
        detail: String? = nil
    ) -> Setting {
        Setting(option, default: defaultValue, range, off: off, meaning, detail: detail, format: { TimeSpan.format($0) })
    }
}

extension Setting where Value == Int {
    /// A count, written as a number.
    public static func count(
        _ option: String, default defaultValue: Int, _ range: ClosedRange<Int>, off: Int? = nil, _ meaning: String, detail: String? = nil
    ) -> Setting {
        Setting(option, default: defaultValue, range, off: off, meaning, detail: detail, format: { "\($0)" })
    }

    /// A byte size, written `512`, `64KiB`, `50MiB`.
    public static func bytes(
        _ option: String, default defaultValue: Int, _ range: ClosedRange<Int>, off: Int? = nil, _ meaning: String, detail: String? = nil
    ) -> Setting {
        Setting(option, default: defaultValue, range, off: off, meaning, detail: detail, format: { ByteSize.formatExact($0) })
    }

    /// A pixel count, written `25MP` or a number.
    public static func pixels(
        _ option: String, default defaultValue: Int, _ range: ClosedRange<Int>, _ meaning: String, detail: String? = nil
    ) -> Setting {
        Setting(option, default: defaultValue, range, meaning, detail: detail, format: { PixelCount.format($0) })
    }
}
