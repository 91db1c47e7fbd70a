import Dispatch
import Foundation

/// Runs blocking C calls (libcurl, MagickWand, file I/O; libpq on each connection's own
/// serial queue) off Swift's cooperative thread pool.
public enum Blocking {
    /// Threads for blocking work: a thread for every item at once, not Dispatch's ramp.
    public static let pool = ThreadPool(name: "halcyon.blocking")

    /// Runs `body` on a thread of `pool` — or, given a queue, on that queue (a connection's
    /// serial queue) — and resumes with its result.
    public static func run<T: Sendable>(on queue: DispatchQueue? = nil,
                                        _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let work: @Sendable () -> Void = { continuation.resume(with: Result { try body() }) }
            if let queue { queue.async(execute: work) } else { pool.submit(work) }
        }
    }
}

/// Threads that start as soon as work waits for one, up to `maxThreads`, and end after
/// `idleTimeout` without work.
///
/// Why not a Dispatch queue: on Linux libdispatch has no kernel feedback about blocked
/// threads, so a concurrent queue starts about 3 threads and then adds about one a second
/// (measured here: 16 one-second sleeps took 5–7 s to all start, again after a few idle
/// seconds), and `DispatchQueue.global()` runs about one item per core. A worker's 8
/// downloads waiting on a slow origin then held back its decodes and store writes.
public final class ThreadPool: @unchecked Sendable {  // all state guarded by `condition`
    public let name: String
    public let maxThreads: Int
    public let idleTimeout: TimeInterval
    private let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var head = 0
    private var idle = 0
    private var threads = 0

    /// Defaults: 512 threads at most (more work waits for one), idle threads end after 10 s.
    public init(name: String, maxThreads: Int = 512, idleTimeout: TimeInterval = 10) {
        self.name = name
        self.maxThreads = max(1, maxThreads)
        self.idleTimeout = idleTimeout
    }

    /// Threads alive now (running work or idle).
    public var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    /// Runs `work` on a pool thread, starting one when none is idle.
    public func submit(_ work: @escaping @Sendable () -> Void) {
        condition.lock()
        queue.append(work)
        let waiting = queue.count - head
        let start = idle < waiting && threads < maxThreads
        if start { threads += 1 }
        condition.signal()
        condition.unlock()
        if start {
            let thread = Thread { [self] in loop() }
            thread.name = name
            thread.start()
        }
    }

    private func loop() {
        condition.lock()
        while true {
            while head == queue.count {
                idle += 1
                let signalled = condition.wait(until: Date(timeIntervalSinceNow: idleTimeout))
                idle -= 1
                if !signalled && head == queue.count {
                    threads -= 1
                    condition.unlock()
                    return
                }
            }
            let work = queue[head]
            head += 1
            if head == queue.count {  // drained: reuse the storage
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= queue.count {  // never drained: drop what was taken
                queue.removeFirst(head)
                head = 0
            }
            condition.unlock()
            work()
            condition.lock()
        }
    }
}
