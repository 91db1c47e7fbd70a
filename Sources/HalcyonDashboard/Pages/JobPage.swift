import Foundation
import HalcyonDomain
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore

/// `/jobs/ID` (template `job`): inputs, the chain's canonical identifier, the result image with
/// its expiry, the source's facts, stage timings, every attempt's error, and retry/cancel (for
/// the operator).
struct JobPage {
    /// The trace a job's page shows: the one its spans were exported in (`trace_id`), else its
    /// enqueuer's (its traceparent's).
    static func traceID(of row: JobRow) -> String? {
        row.traceID ?? row.traceparent.map { String(TraceContext.traceID(of: $0)) }
    }

    /// The row as `JobQueue.show` returns it, with what the dashboard adds.
    struct Model {
        var row: JobRow
        /// The chain's canonical identifier, or why it has none.
        var identifier: Result<String, HalcyonError>
        /// The stored result's expiry, nil when it is not in the store (swept, or another store).
        var resultExpires: Date?
        var resultInStore: Bool
        /// Its trace's page in the operator's tracing UI (`--trace-url`), when it has a trace.
        var traceLink: String? = nil
        /// The jobs whose source is a near-duplicate of this one's (by its PDQ hash, with its
        /// dihedral hashes when it has them), nearest first; empty without a hash.
        var similar: [JobQueue.SimilarImage] = []
    }

    /// The most near-duplicates the page lists.
    static let similarShown = 20
    struct Outcome {
        let digest: String
        let inStore: Bool
        let resultRows: [Row]
    }
    struct Facts {
        let factRows: [Row]
    }
    struct Timings {
        let stages: Charts.Stages
        let totalMs: String?
    }
    struct Attempt {
        struct PerSource {
            let sourceClip: Clipped
            let sourceCode: String
            let messageClip: Clipped
            let attempts: String
            let permanent: Bool
        }
        let attempt: String
        let at: String
        let code: String
        let message: String
        let perSource: [PerSource]
        let soleSource: Clipped?
    }

    static let stageOrder = ["queue_wait_ms", "fetch_ms", "decode_ms", "process_ms", "encode_ms", "store_ms"]

    let id: String
    let state: String
    let notice: String?
    let retry: Button?
    let cancel: Button?
    let inputs: [Row]
    let result: Outcome?
    /// A picture set's rungs, each drawn (template `job`); empty for any other job.
    let rungs: [Rung]
    let hasRungs: Bool
    struct Rung {
        let digest: String
        let caption: String
    }
    let facts: Facts?
    let timings: Timings?
    let hasErrors: Bool
    let errors: [Attempt]

    /// `csrf` is nil for a viewer: no action is offered.
    init(_ m: Model, csrf: String?, notice: String?) {
        let r = m.row
        let id = String(r.id), state = r.state?.rawValue ?? "?"
        self.id = id
        self.state = state
        self.notice = notice
        retry = csrf.flatMap { ["failed", "cancelled"].contains(state) ? Button(action: "/jobs/\(id)/retry", label: "Retry", csrf: $0) : nil }
        cancel = csrf.flatMap {
            ["queued", "running"].contains(state) ? Button(action: "/jobs/\(id)/cancel", label: "Cancel", csrf: $0, danger: true) : nil
        }

        var inputs: [Row] = [.text("source", r.source)]
        let fallbacks = r.fallbackSources ?? []
        if !fallbacks.isEmpty { inputs.append(.lines("fallback sources", fallbacks)) }
        inputs.append(.code("processors", r.processors))
        switch m.identifier {
        case .success(let text): inputs.append(.code("canonical identifier", text))
        case .failure(let error): inputs.append(.muted("canonical identifier", error.description))
        }
        inputs.append(.text("cache key", r.cacheKey))
        inputs.append(.pre("options", r.options.flatMap { $0 == "{}" ? nil : JSONValue.parse($0)?.prettyText ?? $0 }))
        inputs.append(.links("queue", r.queue.map { [Row.Link(href: "/jobs?queue=\(Format.percent($0))", text: $0)] } ?? []))
        let tags = r.tags ?? []
        inputs.append(.links("tags", tags.map { Row.Link(href: "/jobs?tag=\(Format.percent($0))", text: $0) }))
        inputs.append(.text("unique key", r.uniqueKey))
        if let traceID = Self.traceID(of: r) {
            inputs.append(m.traceLink.map { .links("trace", [Row.Link(href: $0, text: traceID)]) } ?? .text("trace", traceID))
        }
        if let traceparent = r.traceparent {
            inputs.append(.text("traceparent", traceparent))
            inputs.append(.text("tracestate", r.tracestate))
        }
        inputs.append(.text("priority", r.priority.map(String.init)))
        inputs.append(.text("attempts", "\(r.attempt ?? 0) of \(r.maxAttempts.map(String.init) ?? "?")"))
        inputs.append(.text("created", Format.time(r.createdAt)))
        inputs.append(.text("run at", Format.time(r.runAt)))
        inputs.append(.text("started", Format.time(r.startedAt)))
        inputs.append(.text("finished", Format.time(r.finishedAt)))
        if let by = r.lockedBy { inputs.append(.text("running on", "\(by) until \(Format.time(r.lockedUntil))")) }
        if let status = r.callbackStatus {
            inputs.append(.text("webhook", "\(status), \(r.callbackAttempts ?? 0) attempts" + (r.callbackError.map { ": " + $0 } ?? "")))
        }
        self.inputs = inputs

        rungs = (r.resultManifest.flatMap(PictureManifest.init(jsonText:))?.rungs ?? []).map { rung in
            let score = rung.score.map { String(format: ", score %.1f", $0) } ?? ""
            return Rung(
                digest: StoreLayout.digest(ofObjectPath: rung.path),
                caption:
                    "\(rung.format.rawValue) \(rung.width)×\(rung.height), \(Format.bytes(Int64(rung.bytes)))\(rung.quality.map { ", q\($0)" } ?? "")\(score)"
            )
        }
        hasRungs = !rungs.isEmpty
        result = r.resultDigest.map { digest in
            Outcome(
                digest: digest, inStore: m.resultInStore,
                resultRows: [
                    .code("digest", digest),
                    .text("image", Self.size(format: r.resultFormat, width: r.resultWidth, height: r.resultHeight)),
                    .text("bytes", r.resultBytes.map { Format.bytes($0) }),
                    .text(
                        "quality", r.resultQualityExact.map { $0.rounded() == $0 ? String(Int($0)) : String($0) } ?? r.resultQuality.map(String.init)),
                    .text("chroma", r.resultChroma),
                    .text("perceptual hash", r.resultPDQ.map { "\($0) (PDQ, quality \(r.resultPDQQuality.map(String.init) ?? "?"))" }),
                    .text("score", r.resultScore.map { String(format: "%.2f", $0) }),
                    .text("target", r.resultTargetMissed.map { $0 ? "missed: the search could not reach min_score" : "reached" }),
                    .text("store hit", r.cacheHit.map { $0 ? "yes" : "no" }),
                    .text("made from", r.resultSource),
                    .text("expires", m.resultExpires.map { Format.utc($0) + " UTC" }),
                    .text("path", r.resultPath),
                ])
        }

        if r.sourceWidth != nil || r.sourceFormat != nil {
            var rows: [Row] = [
                .text("image", Self.size(format: r.sourceFormat, width: r.sourceWidth, height: r.sourceHeight)),
                .text("bytes", r.sourceBytes.map { Format.bytes($0) }),
            ]
            if let meta = r.sourceMeta { rows.append(.pre("metadata", JSONValue.parse(meta)?.prettyText ?? meta)) }
            if let p = r.placeholders { rows.append(.pre("placeholders", JSONValue.parse(p)?.prettyText ?? p)) }
            if let hash = r.sourcePDQ {
                rows.append(.code("perceptual hash", "\(hash) (PDQ, quality \(r.sourcePDQQuality.map(String.init) ?? "?"))"))
                rows.append(
                    .links(
                        "near-duplicates",
                        m.similar.map { s in
                            Row.Link(
                                href: "/jobs/\(s.jobID)", text: "#\(s.jobID) (\(s.distance) bits\(s.variant == "original" ? "" : ", " + s.variant))")
                        }))
            }
            facts = Facts(factRows: rows)
        } else {
            facts = nil
        }

        if let t = r.timings, case .object(let o)? = JSONValue.parse(t) {
            let stages = Self.stageOrder.compactMap { k in o[k]?.numberValue.map { (k.dropLast(3).replacingOccurrences(of: "_", with: " "), $0) } }
            timings = Timings(stages: Charts.stages(stages), totalMs: o["total_ms"]?.numberValue.map { String(format: "%.1f", $0) })
        } else {
            timings = nil
        }

        errors = (r.errors.flatMap { JSONValue.parse($0)?.arrayValue } ?? []).reversed().map { e in
            let perSource = (e["sources"]?.arrayValue ?? []).map { s in
                Attempt.PerSource(
                    sourceClip: Clipped(s["source"]?.stringValue ?? "?", 60), sourceCode: s["code"]?.stringValue ?? "?",
                    messageClip: Clipped(s["message"]?.stringValue ?? "", 200), attempts: String(Int(saturating: s["attempts"]?.numberValue ?? 0)),
                    permanent: s["permanent"]?.boolValue == true)
            }
            return Attempt(
                attempt: String(Int(saturating: e["attempt"]?.numberValue ?? 0)), at: Format.time(e["at"]?.stringValue),
                code: e["code"]?.stringValue ?? "?", message: e["message"]?.stringValue ?? "", perSource: perSource,
                soleSource: perSource.isEmpty ? e["source"]?.stringValue.map { Clipped($0, 60) } : nil)
        }
        hasErrors = !errors.isEmpty
    }

    /// `jpeg 640×480`: the parts that are known.
    static func size(format: String?, width: Int?, height: Int?) -> String {
        [format, width.map { "\($0)×\(height.map(String.init) ?? "?")" }].compactMap { $0 }.joined(separator: " ")
    }

    func render() -> String { Views.render("job", self) }
}
