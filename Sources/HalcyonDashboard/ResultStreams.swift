import Foundation
import HalcyonDomain
import HalcyonRuntime
import HalcyonStore
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// How results are sent (`GET /results/SHA256`): a chunk at a time, never whole, and at most
/// `limit` at once.
///
/// A stream reads one chunk (`ObjectReader.chunkBytes`: 256 KiB on disk, read on an I/O thread;
/// 512 KiB from a bucket, a ranged GET), hands it to the connection in slices of `sliceBytes`, and after each slice
/// waits until the connection's event loop has taken it; the next write then waits while the
/// channel is not writable (more than its high-water mark queued), so the next chunk is read
/// only once the client has taken most of the last. A client that reads slowly holds about two
/// chunks, whatever the object's size, and all results at once about `limit` × two chunks.
/// (Without the wait for the event loop, Hummingbird's writer saw a writability the loop had
/// not updated yet: forty slow clients' streams each ran 15 MB ahead, 700 MiB in all.)
///
/// The chunks are read into two buffers of the stream's own, used in turn (on disk with `pread`
/// straight into them, `LocalObjectReader`), rather than into a new allocation and a copy each.
final class ResultStreams: Sendable {
    let limit: Int
    let stallTimeout: Duration
    private let active = Atomic<Int>(0)
    /// What one `write` hands the connection.
    static let sliceBytes = 64 << 10

    init(limit: Int, stallTimeout: Duration) {
        self.limit = limit
        self.stallTimeout = stallTimeout
    }

    /// Streams running now.
    var count: Int { active.load(ordering: .relaxed) }

    /// A slot for one stream, or nil when `limit` are running.
    func take() -> Slot? {
        var current = active.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = active.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return Slot(self) }
            current = original
        }
        return nil
    }

    /// One stream's place, given back once (by `release()`, or when it goes away).
    final class Slot: Sendable {
        private let streams: ResultStreams
        private let released = Atomic<Bool>(false)

        fileprivate init(_ streams: ResultStreams) {
            self.streams = streams
        }

        deinit { release() }

        func release() {
            if !released.exchange(true, ordering: .acquiringAndReleasing) { streams.active.subtract(1, ordering: .acquiringAndReleasing) }
        }
    }

    /// The body of a result: `reader`'s bytes, a chunk at a time. The reader and the slot are let
    /// go of when the body ends, fails, or is never written (the response dropped).
    func body(_ reader: any ObjectReader, slot: Slot, channel: (any Channel)?, logger: Logger) -> ResponseBody {
        let stream = Stream(reader: reader, slot: slot)
        let stall = stallTimeout
        return ResponseBody(contentLength: reader.bytes) { writer in
            defer { stream.end() }
            let watchdog = channel.map { StallWatchdog(channel: $0, stall: stall, logger: logger) }
            defer { watchdog?.stop() }
            let capacity = min(reader.chunkBytes, reader.bytes)
            let buffers = [ChunkBuffer(capacity: capacity), ChunkBuffer(capacity: capacity)]
            var offset = 0, turn = 0
            while offset < reader.bytes {
                let range = offset..<min(reader.bytes, offset + reader.chunkBytes)
                let chunk = buffers[turn % 2]
                turn += 1
                do {
                    try await chunk.fill(from: reader, range)
                } catch {
                    // The headers are out: the connection is closed short of Content-Length,
                    // which tells the client the body is incomplete.
                    logger.warning("dashboard: a result stream ended early", metadata: ["sent": "\(offset)", "error": "\(error)"])
                    throw error
                }
                offset = range.upperBound
                while let slice = chunk.slice(Self.sliceBytes) {
                    watchdog?.writing()
                    try await writer.write(slice)
                    // The write reaches the connection on its event loop, later: until then the
                    // writer still thinks the connection writable. Once the loop has taken it,
                    // the next `write` sees the writability it left (see above).
                    if let channel { try await channel.eventLoop.submit {}.get() }
                    watchdog?.wrote()
                }
            }
            try await writer.finish(nil)
        }
    }

    /// One of a stream's two chunk buffers. Its storage is reused while nothing else holds it: a
    /// slice the connection has not sent yet keeps the old storage alive, and the next `fill`
    /// then starts a new one (`ByteBuffer`'s copy on write).
    private final class ChunkBuffer: Sendable {
        private let buffer: Mutex<ByteBuffer>

        init(capacity: Int) {
            buffer = Mutex(ByteBufferAllocator().buffer(capacity: capacity))
        }

        /// Empties the buffer and reads `range` of `reader` into it: a file's straight into it on
        /// an I/O thread, a bucket's by a ranged GET (whose bytes are then copied in).
        func fill(from reader: any ObjectReader, _ range: Range<Int>) async throws(HalcyonError) {
            guard let file = reader as? any LocalObjectReader else {
                let data = try await reader.read(range)
                buffer.withLock { buffer in
                    buffer.clear(minimumCapacity: data.count)
                    buffer.writeBytes(data)
                }
                return
            }
            do {
                try await Blocking.run(.io) { try self.fill(from: file, range) }
            } catch {
                throw HalcyonError.wrap(error)
            }
        }

        /// Empties the buffer and reads `range` of `file` straight into it (blocking).
        private func fill(from file: any LocalObjectReader, _ range: Range<Int>) throws(HalcyonError) {
            let failure: HalcyonError? = buffer.withLock { buffer in
                buffer.clear(minimumCapacity: range.count)
                do {
                    try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: range.count) { raw in
                        try file.read(range, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<range.count]))
                        return range.count
                    }
                    return nil
                } catch let error as HalcyonError {
                    return error
                } catch {
                    return HalcyonError(.readFailed, "\(error)")
                }
            }
            if let failure { throw failure }
        }

        /// The next `length` bytes (fewer at the end), or nil when all have been taken.
        func slice(_ length: Int) -> ByteBuffer? {
            buffer.withLock { buffer in
                buffer.readableBytes > 0 ? buffer.readSlice(length: min(length, buffer.readableBytes)) : nil
            }
        }
    }

    /// A stream's reader and slot, let go of once.
    private final class Stream: Sendable {
        let reader: any ObjectReader
        let slot: Slot

        init(reader: any ObjectReader, slot: Slot) {
            self.reader = reader
            self.slot = slot
        }

        deinit { end() }

        func end() {
            reader.close()
            slot.release()
        }
    }
}

/// Closes a result's connection when one write has waited `stall` for the client to take what
/// was queued before it: the pending write then fails and the stream ends, its slot free again.
private final class StallWatchdog: Sendable {
    /// When the write in progress began (milliseconds since `start`), or -1 between writes.
    private let state: WriteState
    private let task: Task<Void, Never>

    private final class WriteState: Sendable {
        let since = Atomic<Int64>(-1)
        let start = ContinuousClock.now
        var now: Int64 { Int64((ContinuousClock.now - start).seconds * 1000) }
    }

    init(channel: any Channel, stall: Duration, logger: Logger) {
        let every = max(.milliseconds(10), min(.seconds(1), stall / 4))
        let limit = Int64(stall.seconds * 1000)
        let state = WriteState()
        self.state = state
        task = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                let began = state.since.load(ordering: .relaxed)
                if began >= 0 && state.now - began >= limit {
                    logger.notice("dashboard: closed a result stream whose client stopped reading", metadata: ["stall": "\(stall)"])
                    channel.close(promise: nil)
                    return
                }
            }
        }
    }

    func writing() { state.since.store(state.now, ordering: .relaxed) }
    func wrote() { state.since.store(-1, ordering: .relaxed) }
    func stop() { task.cancel() }
}
