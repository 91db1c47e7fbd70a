import HalcyonDomain
import HalcyonRuntime
import Testing

/// What an error entry on a job's row holds: messages cut to 4 KiB of UTF-8, never mid-character.
struct ErrorEntryTests {
    @Test func prefixByUTF8BytesKeepsWholeCharacters() {
        #expect("abc".prefix(utf8Bytes: 10) == "abc")
        #expect("abcdef".prefix(utf8Bytes: 4) == "abcd")
        #expect("ééé".prefix(utf8Bytes: 5) == "éé", "two bytes each: the third does not fit")
        #expect("👍🏽x".prefix(utf8Bytes: 7) == "", "an emoji with its modifier is one character of 8 bytes")
        #expect(String(repeating: "€", count: 3000).prefix(utf8Bytes: 4096).utf8.count == 4095)
    }

    @Test func entriesHoldAtMostFourKiBOfMessage() throws {
        let wide = String(repeating: "ж", count: 5000)  // 10,000 bytes
        let error = HalcyonError(.invalidSource, wide, detail: String(repeating: "é", count: 2000))
        guard case .object(let entry) = error.errorEntry, case .string(let message)? = entry["message"],
            case .string(let detail)? = entry["detail"]
        else {
            Issue.record("no message in \(error.errorEntry)")
            return
        }
        #expect(message.utf8.count == 4096 && message.allSatisfy { $0 == "ж" })
        #expect(detail.utf8.count == 1024)
    }

    @Test func aLongSourceIsNamedByItsStartSizeAndDigest() {
        let url = "https://images.example/" + String(repeating: "a", count: 4000)
        #expect(SourceLabel.label(url) == url, "up to 4 KiB, whole")
        let data = "data:image/png;base64," + String(repeating: "A", count: 14 << 20)
        let label = SourceLabel.label(data)
        // The digest as Python's hashlib computes it for this text.
        #expect(
            label
                == "data:image/png;base64,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA… (\(data.utf8.count) bytes, sha256 05ca200e96109b55c27bfaea378a426880a59a6515040132271e1721a4b38a93)"
        )
        let error = HalcyonError(
            .invalidSource, "not an image", source: data,
            sources: [SourceFailure(source: data, code: .invalidSource, message: "x", attempts: 1, permanent: true)])
        #expect(error.errorEntry.jsonText.utf8.count < 1024)
    }
}
