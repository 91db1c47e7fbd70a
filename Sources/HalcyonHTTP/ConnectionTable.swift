import NIOCore
import Synchronization

/// One server's open connections, and since when each has been waiting for a request (nil
/// while one of its requests is being answered). At the limit, a new connection makes room by
/// closing the one that has waited longest: connections that trickle bytes, or say nothing, can
/// delay a normal request by no more than the time it takes to close one of them.
final class ConnectionTable: Sendable {
    private struct Entry {
        let channel: any Channel
        var waitingSince: NIODeadline?
    }

    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])
    private let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Registers `channel`, closing the longest-waiting other connection when that makes more
    /// than the limit. False when every other connection is being answered: `channel` is not
    /// served (the caller closes it).
    func admit(_ channel: any Channel) -> Bool {
        let (admitted, evicted): (Bool, (any Channel)?) = entries.withLock { entries in
            var evicted: (any Channel)?
            if entries.count >= limit {
                let waiting = entries.compactMap { key, entry in entry.waitingSince.map { (key, entry.channel, $0) } }
                guard let oldest = waiting.min(by: { $0.2 < $1.2 }) else { return (false, nil) }
                entries[oldest.0] = nil
                evicted = oldest.1
            }
            entries[ObjectIdentifier(channel)] = Entry(channel: channel, waitingSince: .now())
            return (true, evicted)
        }
        evicted?.close(promise: nil)
        return admitted
    }

    /// `channel` waits for a request from now on (`true`), or has one being answered (`false`).
    func setWaiting(_ channel: any Channel, _ waiting: Bool) {
        entries.withLock { entries in
            let key = ObjectIdentifier(channel)
            if entries[key] != nil { entries[key]!.waitingSince = waiting ? .now() : nil }
        }
    }

    /// Forgets `channel` (it closed).
    func remove(_ channel: any Channel) {
        _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// Connections registered now.
    var count: Int { entries.withLock { $0.count } }
}
