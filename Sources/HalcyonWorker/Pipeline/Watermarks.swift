import Foundation
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonRuntime
import Synchronization

/// The watermarks a worker's jobs draw: fetched through the worker's `Fetcher` (the SSRF guard,
/// size limits, download coalescing and the originals cache apply, as to any source), their
/// headers read and checked once — jobs asking for one that is being loaded wait for that load —
/// and kept (encoded) for `ttl` within `maxBytes` (least recently used out first). A failed load
/// is not kept. Each job decodes the marks it draws itself, at the size it draws them.
final class Watermarks: Sendable {
    /// Encoded watermarks kept, all together.
    static let maxBytes = 64 << 20
    /// How long a decoded watermark is reused before it is fetched again.
    static let ttl: Duration = .seconds(600)

    private struct Entry {
        var load: Task<WatermarkSource, any Error>
        var started: ContinuousClock.Instant
        var used: ContinuousClock.Instant
        /// Encoded bytes, once loaded.
        var bytes = 0
    }
    private let entries = Mutex<[String: Entry]>([:])
    let fetcher: Fetcher
    let limits: ImageLimits
    let maxDataBytes: Int

    init(fetcher: Fetcher, limits: ImageLimits, maxDataBytes: Int) {
        self.fetcher = fetcher
        self.limits = limits
        self.maxDataBytes = maxDataBytes
    }

    /// Each of `sources` decoded, or the error that fetching or decoding it ended with
    /// (`job.cancelled` for those not started once `cancel` is raised).
    func load(_ sources: [String], cancel: CancellationFlag) async -> [String: Result<WatermarkSource, HalcyonError>] {
        var out: [String: Result<WatermarkSource, HalcyonError>] = [:]
        for source in sources where out[source] == nil {
            guard !cancel.isCancelled else {
                out[source] = .failure(.abandoned)
                continue
            }
            let load = task(for: source)
            do {
                let mark = try await load.value
                remember(source, bytes: mark.data.count)
                out[source] = .success(mark)
            } catch {
                forget(source, load)
                out[source] = .failure(HalcyonError.wrap(error))
            }
        }
        return out
    }

    /// The load of `source`: the one kept or under way, else a new one.
    private func task(for source: String) -> Task<WatermarkSource, any Error> {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            if var e = entries[source], now - e.started < Self.ttl {
                e.used = now
                entries[source] = e
                return e.load
            }
            let (fetcher, limits, maxDataBytes) = (self.fetcher, self.limits, self.maxDataBytes)
            let load = Task {
                let request = try FetchRequest(sources: [source], maxDataBytes: maxDataBytes)
                let fetched = try await fetcher.fetch(request, cancel: CancellationFlag())
                return try await Blocking.run(.processing) { try WatermarkSource.check(fetched.data, format: fetched.format, limits: limits) }
            }
            entries[source] = Entry(load: load, started: now, used: now)
            return load
        }
    }

    /// Records a loaded watermark's size, and drops the least recently used while over `maxBytes`.
    private func remember(_ source: String, bytes: Int) {
        entries.withLock { entries in
            entries[source]?.bytes = bytes
            while entries.values.reduce(0, { $0 + $1.bytes }) > Self.maxBytes,
                let oldest = entries.filter({ $0.value.bytes > 0 }).min(by: { $0.value.used < $1.value.used })?.key
            {
                entries[oldest] = nil
            }
        }
    }

    private func forget(_ source: String, _ load: Task<WatermarkSource, any Error>) {
        entries.withLock { entries in
            if entries[source]?.load == load { entries[source] = nil }
        }
    }
}
