import Foundation

/// `HALCYON_POLL_ONLY`: when set (to anything but empty, `0` or `false`), `work` and `wait` poll
/// instead of LISTENing, as with `--poll-only` — one setting for a deployment behind a pooler in
/// transaction mode, where LISTEN lands on whichever server connection ran it.
package enum PollOnlyEnvironment {
    package static var isSet: Bool { isSet(in: ProcessInfo.processInfo.environment) }

    /// Whether `environment` sets it.
    package static func isSet(in environment: [String: String]) -> Bool {
        guard let value = environment["HALCYON_POLL_ONLY"]?.lowercased() else { return false }
        return !["", "0", "false", "no", "off"].contains(value)
    }
}
