import Foundation

/// A small seeded generator (SplitMix64) and the mutations the fuzz tests share; a
/// `RandomNumberGenerator`, so any test can draw seeded numbers from it.
public struct FuzzRandom: RandomNumberGenerator {
    public let seed: UInt64
    private var state: UInt64
    public init(seed: UInt64) { self.seed = seed; state = seed }

    public static func fromEnvironment() -> FuzzRandom {
        FuzzRandom(seed: ProcessInfo.processInfo.environment["HALCYON_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max))
    }
    public static func iterations(default n: Int) -> Int {
        ProcessInfo.processInfo.environment["HALCYON_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? n
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    public mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }

    public mutating func soup(_ alphabet: [String], length: Int) -> String {
        (0..<length).map { _ in alphabet[below(alphabet.count)] }.joined()
    }

    /// One to four edits: insert, delete, replace a character or splice in a token.
    public mutating func mutate(_ text: String, alphabet: [String]) -> String {
        var chars = Array(text)
        for _ in 0...below(4) {
            let at = below(chars.count + 1)
            switch below(4) {
            case 0: chars.insert(contentsOf: alphabet[below(alphabet.count)], at: at)
            case 1: if at < chars.count { chars.remove(at: at) }
            case 2: if at < chars.count { chars[at] = Array(alphabet[below(alphabet.count)]).first ?? " " }
            default:
                let piece = Array(text)
                let from = below(piece.count), len = below(12)
                chars.insert(contentsOf: piece[from..<min(piece.count, from + len)], at: at)
            }
        }
        return String(chars)
    }
}
