import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonTestSupport
import Testing

/// Property-based fuzzing of the source parser (see ChainFuzzTests for the knobs): mutations
/// of valid sources and scheme/host/path soup. `Source.parse` returns a source or throws
/// `job.invalid_source`; what it accepts is fetchable in kind — http(s) with a host, an
/// absolute file path, or a capped data: payload.
@Suite struct SourceFuzzTests {
    static let seeds = [
        "https://images.example.com/a/b.jpg?w=1&h=2#frag", "http://127.0.0.1:8080/x.png", "http://[::1]:80/y.gif",
        "file:///srv/images/a.jpg", "file://localhost/srv/b.png", "data:image/png;base64,iVBORw0KGgo=", "data:,hello",
        "https://user:pass@example.com/%2e%2e/x.jpg", "s3://images-bucket/a/b c?.jpg#x",
    ]
    static let alphabet: [String] = [
        ":", "/", "//", "@", "?", "#", "%", "%00", "%2e", "..", "[", "]", "::", "0", "127.0.0.1",
        "169.254.169.254", "localhost", "http", "https", "file", "data", "s3", "gopher", ";base64", ",",
        " ", "\t", "\n", "\u{0}", "é", "☃", "\u{202E}", "xn--", "A", "=", "\\",
    ]

    @Test func parseNeverFailsOtherThanAsInvalidSource() {
        var rng = FuzzRandom.fromEnvironment()
        var accepted = 0
        for i in 0..<FuzzRandom.iterations(default: 20_000) {
            let input =
                i % 4 == 3
                ? rng.soup(Self.alphabet, length: rng.below(30)) : rng.mutate(Self.seeds[rng.below(Self.seeds.count)], alphabet: Self.alphabet)
            do {
                switch try Source.parse(input, maxDataBytes: 1024) {
                case .network(let url):
                    #expect(["http", "https"].contains(url.scheme?.lowercased() ?? ""), "seed \(rng.seed) input \(input.debugDescription)")
                    #expect(!(url.host ?? "").isEmpty, "seed \(rng.seed) input \(input.debugDescription)")
                case .file(let path):
                    #expect(path.hasPrefix("/"), "seed \(rng.seed) input \(input.debugDescription)")
                case .object(let bucket, let key):
                    #expect(!bucket.isEmpty && !key.isEmpty && key.utf8.count <= 1024, "seed \(rng.seed) input \(input.debugDescription)")
                case .data(_, let bytes):
                    #expect(bytes.count <= 1024, "seed \(rng.seed) input \(input.debugDescription)")
                }
                accepted += 1
            } catch {
                guard error.code == .invalidSource else {
                    Issue.record("seed \(rng.seed) input \(input.debugDescription): \(error)")
                    return
                }
            }
        }
        #expect(accepted > 0)
    }
}
