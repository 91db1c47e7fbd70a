import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonRuntime

/// Fuzz target `options`: a job's `options` jsonb text through Halcyon's JSON reader
/// (`JSONValue.parse`) and `JobOptions.parse`, then what the worker derives from valid options:
/// the expiry and its extension, the retry strategy's delays, the request headers.
///
/// Properties checked: JSON written from a parsed value (`jsonText`) parses back to the same
/// value; every refusal is `job.invalid_options`; no expiry lies past "never".
public enum OptionsFuzz {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    public static func run(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        if let value = JSONValue.parse(text) {
            let written = value.jsonText
            guard let again = JSONValue.parse(written) else { preconditionFailure("'\(text)' was written as '\(written)', which does not parse") }
            precondition(again == value, "'\(text)' was written as '\(written)', which parses to something else")
            _ = value.prettyText
        }
        let options: JobOptions
        do {
            options = try JobOptions.parse(json: text)
        } catch {
            precondition(error.code == .invalidOptions, "options '\(text)' failed with \(error.code), not job.invalid_options")
            return
        }
        let expiry = options.expiration.expiry(from: now)
        precondition(expiry <= StorageExpiration.neverInstant)
        _ = TimeSpan.format(expiry.timeIntervalSince(now))
        if let extended = options.extend.extended(accessed: now, expires: expiry, now: now.addingTimeInterval(60)) {
            precondition(extended.expires <= StorageExpiration.neverInstant)
        }
        if let retry = options.retry {
            let strategy = DelayRetryStrategy(retry)
            for n in 0...(retry.max + 1) {
                if let delay = strategy.delay(beforeRetry: n, after: HalcyonError(.timeout, "timed out"), random: 0.5) {
                    precondition(delay >= 0 && delay.isFinite, "retry \(n) of \(retry) waits \(delay)")
                }
            }
        }
        _ = try? FetchRequest(sources: ["https://images.example/a.jpg"], headers: options.headers, retry: nil)
    }
}
