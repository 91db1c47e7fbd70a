import ArgumentParser
import HalcyonDomain
import HalcyonRuntime

/// A unit a command-line value is written in: how to read it and how to write it back.
package protocol ArgumentUnit {
    associatedtype Value: Comparable & Sendable
    static func parse(_ text: String) -> Value?
    static func format(_ value: Value) -> String
}

/// A value with a unit on the command line, parsed by ArgumentParser itself (so a malformed
/// value gets its own error naming the option); ranges are checked in `validate()` with
/// `check(_:_:)`, which names the option and the range.
package struct UnitArgument<Unit: ArgumentUnit>: ExpressibleByArgument, CustomStringConvertible, Sendable {
    package let value: Unit.Value
    package let description: String

    package init?(argument: String) {
        guard let v = Unit.parse(argument) else { return nil }
        value = v
        description = argument
    }

    /// A default, written back in the unit (`30s`, `50MiB`, `100MP`).
    package init(_ value: Unit.Value) {
        self.value = value
        description = Unit.format(value)
    }

    package var defaultValueDescription: String { description }

    /// Throws, naming `option`, unless `range` holds the value.
    package func check(_ option: String, _ range: ClosedRange<Unit.Value>) throws {
        guard range.contains(value) else {
            throw ValidationError("\(option) must be from \(Unit.format(range.lowerBound)) to \(Unit.format(range.upperBound)); got \(description)")
        }
    }

    /// The same for the option `setting` describes: its name and range (and its off value).
    package func check(_ setting: Setting<Unit.Value>) throws {
        if value == setting.off { return }
        try check(setting.option, setting.range)
    }
}

/// Durations — `250ms`, `30s`, `10m`, `12h`, `7d` (a bare number is seconds).
package enum Seconds: ArgumentUnit {
    /// Nil beyond a million years, which `Duration` could not hold exactly anyway.
    package static func parse(_ text: String) -> Duration? {
        guard let seconds = TimeSpan.parse(text), seconds < 3e13 else { return nil }
        return .seconds(seconds)
    }
    package static func format(_ value: Duration) -> String { TimeSpan.format(value) }
}

/// Byte sizes — `512`, `64KiB`, `50MiB`, `2GiB` (KB/MB/GB are powers of 1000).
package enum Bytes: ArgumentUnit {
    package static func parse(_ text: String) -> Int? { ByteSize.parse(text) }
    /// `50MiB` when exact, else `1.5 MiB`.
    package static func format(_ value: Int) -> String { ByteSize.formatExact(value) }
}

/// Pixel counts — `25000000`, `25MP` (megapixels), `500KP`.
package enum Pixels: ArgumentUnit {
    package static func parse(_ text: String) -> Int? { PixelCount.parse(text) }
    package static func format(_ value: Int) -> String { PixelCount.format(value) }
}

package typealias TimeSpanArgument = UnitArgument<Seconds>
package typealias ByteSizeArgument = UnitArgument<Bytes>
package typealias PixelCountArgument = UnitArgument<Pixels>

extension UnitArgument where Unit == Seconds {
    package var duration: Duration { value }
    package var seconds: Double { value.seconds }

    /// `check(_:_:)` with the range in seconds.
    package func check(_ option: String, _ seconds: ClosedRange<Double>) throws {
        try check(option, Duration.seconds(seconds.lowerBound)...Duration.seconds(seconds.upperBound))
    }
}
extension UnitArgument where Unit == Bytes { package var bytes: Int { value } }
extension UnitArgument where Unit == Pixels { package var pixels: Int { value } }

extension RetryOptions.Backoff: ExpressibleByArgument {}
