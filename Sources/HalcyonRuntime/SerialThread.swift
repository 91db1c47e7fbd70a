import Foundation

/// A thread of its own that runs the closures given to it one at a time, in order: for a C
/// handle that must stay on one thread and must never wait for a free thread (a database
/// connection's heartbeats). Dispatch's queues share a pool that on Linux grows by about a
/// thread a second; with its threads busy decoding images, a heartbeat queued there waited
/// seconds — long enough for a short lease to lapse.
///
/// The thread ends once `finish()` is called and the closures already given have run.
public final class SerialThread: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [() -> Void] = []  // guarded by `condition`
    private var finished = false  // guarded by `condition`
    private var owner: pthread_t?  // guarded by `condition`; set before any item runs

    /// `stackSize`: 1 MiB suits a database connection; blocking work that calls into
    /// ImageMagick gets what a default thread has.
    public init(name: String, stackSize: Int = 1 << 20) {
        let t = Thread { [self] in
            Self.nameThisThread(name)
            self.loop()
        }
        t.name = name
        t.stackSize = stackSize
        t.start()
    }

    /// True on this object's thread.
    public var isCurrent: Bool {
        condition.lock()
        defer { condition.unlock() }
        return owner.map { pthread_equal($0, pthread_self()) != 0 } ?? false
    }

    /// Runs `item` on the thread after those given before it.
    public func async(_ item: @escaping @Sendable () -> Void) {
        condition.lock()
        items.append(item)
        condition.signal()
        condition.unlock()
    }

    /// Runs `body` on the thread and waits for it. Blocking: never call from the cooperative
    /// pool (on the thread itself it runs `body` at once).
    public func sync<T>(_ body: @escaping () throws -> T) throws -> T {
        if isCurrent { return try body() }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<T, any Error>?
        nonisolated(unsafe) let work = body
        async {
            result = Result { try work() }
            done.signal()
        }
        done.wait()  // `result` is written before the signal and read after it
        return try result!.get()
    }

    /// Runs `body` on the thread and resumes with its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Lets the thread end once what it was given has run.
    public func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    /// Gives the calling thread `name` (its first 15 bytes) where the system shows it — `top -H`,
    /// `ps -L`, `/proc/PID/task/ID/comm` — which Foundation's `Thread.name` does not do on Linux.
    static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    private func loop() {
        condition.lock()
        owner = pthread_self()
        condition.unlock()
        while true {
            condition.lock()
            while items.isEmpty && !finished { condition.wait() }
            if items.isEmpty {
                condition.unlock()
                return
            }
            let item = items.removeFirst()
            condition.unlock()
            item()
        }
    }
}
