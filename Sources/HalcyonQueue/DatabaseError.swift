import CLibPQ
import Dispatch
import Foundation

/// A database failure. `connectionLost` tells callers that retrying after a reconnect may help.
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var sqlState: String?
    public var connectionLost: Bool

    public init(message: String, sqlState: String? = nil, connectionLost: Bool) {
        self.message = message
        self.sqlState = sqlState
        self.connectionLost = connectionLost
    }

    public var description: String {
        (sqlState.map { "[\($0)] " } ?? "") + message
    }

    /// Whether the same statement may succeed if tried again: the connection was lost (or
    /// timed out and was reset), or the server hit a conflict or a shortage that passes —
    /// serialization failures and deadlocks (class 40), lock timeouts (55P03), insufficient
    /// resources (53), an operator's or a restart's intervention (57), system errors (58).
    /// Everything else — a trigger's `RAISE`, a constraint, a bad value — fails the same way
    /// every time and must not be retried forever.
    public var isTransient: Bool {
        if connectionLost { return true }
        guard let state = sqlState else { return false }
        return ["08", "40", "53", "57", "58"].contains(String(state.prefix(2))) || state == "55P03" || state == "55006"
    }

    /// The SQLSTATE of a statement that ran past its deadline (`query_canceled`).
    public static let timedOutState = "57014"
}
