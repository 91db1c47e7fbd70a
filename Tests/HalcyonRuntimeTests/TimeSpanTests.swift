import Foundation
import HalcyonRuntime
import Testing

@Suite struct TimeSpanTests {
    @Test func parsesUnits() {
        #expect(TimeSpan.parse("250ms") == 0.25)
        #expect(TimeSpan.parse("30s") == 30)
        #expect(TimeSpan.parse("10m") == 600)
        #expect(TimeSpan.parse("12h") == 43200)
        #expect(TimeSpan.parse("7d") == 604800)
        #expect(TimeSpan.parse("1.5s") == 1.5)
        #expect(TimeSpan.parse("5") == 5)
    }

    @Test func rejectsNonsense() {
        for bad in ["", "abc", "-1s", "1x", "nan", "infs", "s"] {
            #expect(TimeSpan.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func formats() {
        #expect(TimeSpan.format(0.25) == "250ms")
        #expect(TimeSpan.format(120) == "2m")
        #expect(TimeSpan.format(86400 * 7) == "7d")
        #expect(TimeSpan.format(1.5) == "1.5s")
    }

    /// A `Duration` in seconds and in whole nanoseconds (saturating), the one conversion each.
    @Test func durationsInSecondsAndNanoseconds() {
        #expect(Duration.milliseconds(1500).seconds == 1.5)
        #expect(Duration.zero.seconds == 0)
        #expect(Duration.milliseconds(1500).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).nanoseconds == 7)
        #expect(Duration.seconds(-2).nanoseconds == -2_000_000_000)
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
    }
}

@Suite struct ByteSizeTests {
    /// What a size is written back as reads back as the same size, up to the largest a setting
    /// takes (`--max-memory`'s 1 PiB): a help text's range can be typed as it is printed.
    @Test func sizesReadBackAsWritten() {
        for value in [0, 512, 64 << 10, 50 << 20, 3 << 30, 1 << 40, 1 << 50, 3 << 50] {
            #expect(ByteSize.parse(ByteSize.formatExact(value)) == value, "\(ByteSize.formatExact(value))")
        }
        #expect(ByteSize.formatExact(1 << 50) == "1PiB")
        #expect(ByteSize.parse("1PiB") == 1 << 50 && ByteSize.parse("2PB") == 2_000_000_000_000_000)
        #expect(ByteSize.format(Int64(3) << 50) == "3.0 PiB")
    }

    @Test func sizesPastAnExbibyteAreNotSizes() {
        for bad in ["2EiB", "1025PiB", "99999999TB", "9223372036854775807", "1e300b", "-1KiB"] {
            #expect(ByteSize.parse(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct SaturatingIntTests {
    @Test func anyDoubleConverts() {
        #expect(Int(saturating: 3.9) == 3 && Int(saturating: -3.9) == -3)
        #expect(Int(saturating: .nan) == 0)
        #expect(Int(saturating: .infinity) == .max && Int(saturating: -.infinity) == .min)
        #expect(Int(saturating: 1e300) == .max && Int(saturating: -1e300) == .min)
        #expect(Int(saturating: 9_223_372_036_854_774_784.0) == 9_223_372_036_854_774_784)
    }
}
