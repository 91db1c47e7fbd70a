import Foundation
import Logging
import Testing

@testable import HalcyonRuntime

/// The text log's escaping.
@Suite struct LogTextTests {
    @Test func controlCharactersAreEscaped() {
        #expect(LogText.escaped("plain text: ünïcödé ✓") == "plain text: ünïcödé ✓")
        #expect(LogText.escaped("a\nb\rc\td") == #"a\nb\rc\td"#)
        #expect(LogText.escaped("\u{1B}[31mred\u{1B}[0m") == #"\u001b[31mred\u001b[0m"#)
        #expect(LogText.escaped("\u{0}\u{7}\u{7F}\u{85}\u{9B}") == #"\u0000\u0007\u007f\u0085\u009b"#)
        #expect(LogText.escaped("x\u{2028}y\u{2029}z") == #"x\u2028y\u2029z"#)
        #expect(LogText.escaped("\u{202E}evil\u{202C}\u{2066}\u{2069}\u{200E}\u{200F}\u{61C}") == #"\u202eevil\u202c\u2066\u2069\u200e\u200f\u061c"#)
        // A backslash is escaped too, so an escape in the log is never the source's own text.
        #expect(LogText.escaped(#"C:\n"#) == #"C:\\n"#)
    }

    @Test func everyTextLineIsOneLineWithItsForgedTextEscaped() {
        let forged = "\n2026-11-27T12:00:00Z CRITICAL forged"
        let metadata: Logger.Metadata = ["source": "http://a/\(forged)", "key\nname": "k\r\u{2028}\u{1B}[2J"]
        let line = HalcyonLogHandler.line(
            time: "2026-11-27T00:00:00Z", level: .notice, message: "job failed\(forged)", label: "t", metadata: metadata, format: .text)
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{2028}" || $0 == "\u{1B}" }, "\(line)")
        #expect(
            line
                == #"2026-11-27T00:00:00Z NOTICE job failed\n2026-11-27T12:00:00Z CRITICAL forged key\nname=k\r\u2028\u001b[2J source=http://a/\n2026-11-27T12:00:00Z CRITICAL forged"#
        )
        let json = HalcyonLogHandler.line(
            time: "2026-11-27T00:00:00Z", level: .notice, message: "job failed\(forged)", label: "t", metadata: metadata, format: .json)
        #expect(!json.contains("\n") && !json.contains("\r"))
        guard case .object(let object)? = JSONValue.parse(json) else {
            Issue.record("not JSON: \(json)")
            return
        }
        #expect(object["msg"]?.stringValue == "job failed\(forged)")
        #expect(object["source"]?.stringValue == "http://a/\(forged)")
    }
}
