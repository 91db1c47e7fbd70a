import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonFetch
import HalcyonImage
import HalcyonQueue
import HalcyonTracing
import Synchronization

/// When each phase of a traced group's image work began, by the wall clock: marked on the
/// processing thread (`ImagePipeline.measured`'s `phases`), read once the work is done.
final class PhaseClock: Sendable {
    private let marks = Mutex<(decoding: WallTime?, chains: [Int: WallTime])>((nil, [:]))

    func mark(_ phase: Phase) {
        let now = WallTime.now()
        marks.withLock { m in
            switch phase {
            case .decoding: m.decoding = m.decoding ?? now
            case .chain(let i): m.chains[i] = now
            }
        }
    }

    var decoding: WallTime? { marks.withLock { $0.decoding } }
    func chain(_ i: Int) -> WallTime? { marks.withLock { $0.chains[i] } }
}

/// The spans of a job's stages, from what the runner measured. Nothing in them names a
/// credential: a source is its scheme and host, never its path, query or user info.
enum StageSpans {
    /// The `fetch` spans (kind client) of one download, shared by `sharedBy` jobs: one per
    /// source tried, in order, each with its host, its attempts (retries included), the bytes it
    /// gave or its error (`error.type`, the HTTP status of a `fetch.http_status`).
    static func fetch(_ tries: [FetchTrail.Try], sharedBy: Int) -> [StageSpan] {
        tries.map { t in
            let start = WallTime(nanoseconds: UInt64(max(0, t.started.timeIntervalSince1970 * 1e9)))
            var span = StageSpan(name: "fetch", kind: .client, start: start, end: start.adding(seconds: t.seconds))
            span.attributes =
                location(t.source) + [
                    ("halcyon.fetch.source_index", .int(Int64(t.index))), ("halcyon.fetch.attempts", .int(Int64(t.attempts))),
                ]
            switch t.result {
            case .success(let bytes): span.attributes.append(("http.response.body.size", .int(Int64(bytes))))
            case .failure(let error):
                span.attributes.append(("error.type", .string(error.code.description)))
                if let status = error.httpStatus { span.attributes.append(("http.response.status_code", .int(Int64(status)))) }
                span.status = .error(String(error.message.prefix(500)))
            }
            if sharedBy > 1 { span.attributes.append(("halcyon.fetch.shared_by", .int(Int64(sharedBy)))) }
            return span
        }
    }

    /// Where a source is, without anything secret: `url.scheme`, and `server.address` and
    /// `server.port` for a network source (an S3 object: its bucket).
    static func location(_ source: Source) -> Attributes {
        switch source {
        case .network(let url):
            var attributes: Attributes = [("url.scheme", .string(url.scheme?.lowercased() ?? "http"))]
            if let host = url.host { attributes.append(("server.address", .string(host))) }
            if let port = url.port { attributes.append(("server.port", .int(Int64(port)))) }
            return attributes
        case .file: return [("url.scheme", .string("file"))]
        case .object(let bucket, _): return [("url.scheme", .string("s3")), ("aws.s3.bucket", .string(bucket))]
        case .data: return [("url.scheme", .string("data"))]
        }
    }

    /// A processed job's `decode`, `transform` (an event per step) and `encode` spans: chain
    /// `index` of a group whose one decode served `sharedBy` jobs.
    static func image(_ image: ProcessedImage, chain: ProcessorChain, phases: PhaseClock, index: Int, sharedBy: Int) -> [StageSpan] {
        var spans: [StageSpan] = []
        if let decoding = phases.decoding {
            var decode = StageSpan(name: "decode", start: decoding, end: decoding.adding(seconds: image.decodeSeconds))
            if let facts = image.source {
                decode.attributes = [
                    ("halcyon.source.format", .string(facts.format.rawValue)), ("halcyon.source.width", .int(Int64(facts.width))),
                    ("halcyon.source.height", .int(Int64(facts.height))),
                ]
            }
            if sharedBy > 1 { decode.attributes.append(("halcyon.decode.shared_by", .int(Int64(sharedBy)))) }
            spans.append(decode)
        }
        guard let started = phases.chain(index) else { return spans }
        let names = chain.chain.steps.map { type(of: $0).name }
        var transform = StageSpan(name: "transform", start: started, end: started.adding(seconds: image.processSeconds))
        transform.attributes = [("halcyon.chain.steps", .strings(names))]
        transform.events = names.enumerated().map { i, name in
            SpanEvent(name: name, time: started, attributes: [("halcyon.step.index", .int(Int64(i)))])
        }
        spans.append(transform)
        var encode = StageSpan(name: "encode", start: transform.end, end: transform.end.adding(seconds: image.encodeSeconds))
        encode.attributes = [
            ("halcyon.image.format", .string(image.format.rawValue)), ("halcyon.image.bytes", .int(Int64(image.data.count))),
            ("halcyon.image.width", .int(Int64(image.width))), ("halcyon.image.height", .int(Int64(image.height))),
        ]
        if let quality = image.quality { encode.attributes.append(("halcyon.image.quality", .int(Int64(quality)))) }
        if let score = image.score {
            encode.attributes.append(("halcyon.image.score", .double(score)))
            encode.attributes.append(("halcyon.image.encodes", .int(Int64(image.encodes))))
        }
        spans.append(encode)
        return spans
    }

    /// The `store` span of a result written (or found already there: the same bytes stored by
    /// another job), with its content-addressed object.
    static func store(_ result: Result<JobResult, HalcyonError>, start: WallTime, seconds: Double) -> StageSpan {
        var span = StageSpan(name: "store", start: start, end: start.adding(seconds: seconds))
        switch result {
        case .success(let stored):
            span.attributes = [("halcyon.store.outcome", .string("written")), ("halcyon.store.object", .string(stored.path))]
        case .failure(let error):
            span.attributes = [("error.type", .string(error.code.description))]
            span.status = .error(String(error.message.prefix(500)))
        }
        return span
    }
}
