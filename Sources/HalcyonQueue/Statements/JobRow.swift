import HalcyonDomain
import HalcyonRuntime

/// A row of `halcyon.jobs` as the queue's statements return it: the one definition of a job's
/// columns. `JobRow.schema` names each column, the field it goes to and how its text reads;
/// every statement that returns job columns (the claim, `showJob`, `jobStates`, `listJobs`, …)
/// decodes them through it, and `showJob` selects every one of them (`*`: the tests check the
/// schema against the table, names, order and types). A field is nil when the statement did not
/// select its column, or it was NULL.
///
/// Values are kept as the statements return them where that is what their readers want:
/// instants as PostgreSQL's text (printed as they are), jsonb columns as JSON text (`::text`).
public struct JobRow: Sendable, Equatable {
    public var id: Int64
    public var source: String?
    public var fallbackSources: [String]?
    public var processors: String?
    public var cacheKey: String?
    /// JSON text.
    public var options: String?
    public var priority: Int?
    public var state: JobState?
    public var attempt: Int?
    public var maxAttempts: Int?
    public var runAt: String?
    public var lockedBy: String?
    public var lockedUntil: String?
    public var resultKey: String?
    public var resultDigest: String?
    public var resultPath: String?
    public var resultBytes: Int64?
    public var resultWidth: Int?
    public var resultHeight: Int?
    public var resultFormat: String?
    public var resultSource: String?
    public var cacheHit: Bool?
    /// JSON text.
    public var errors: String?
    public var lastError: String?
    public var createdAt: String?
    public var startedAt: String?
    public var finishedAt: String?
    /// JSON text.
    public var timings: String?
    public var queue: String?
    public var uniqueKey: String?
    public var tags: [String]?
    public var callbackStatus: String?
    public var callbackAttempts: Int?
    public var callbackError: String?
    public var callbackAt: String?
    public var sourceWidth: Int?
    public var sourceHeight: Int?
    public var sourceFormat: String?
    public var sourceBytes: Int64?
    /// JSON text.
    public var sourceMeta: String?
    /// JSON text.
    public var placeholders: String?
    /// A picture set's manifest (rungs, srcset, picture), JSON text.
    public var resultManifest: String?
    /// The encoder quality (1–100) and the perceptual score (0–100), as bounded when read: a value
    /// outside them is nil (a quality) or held to them (a score), NaN nil (`ResultMeasures`).
    public var resultQuality: Int?
    public var resultScore: Double?
    /// The quality with its half step (82.5), held to 1–100 in halves when read.
    public var resultQualityExact: Double?
    /// PDQ hashes (64 hex digits) and their qualities (0–100); the source's seven other dihedral hashes.
    public var sourcePDQ: String?
    public var sourcePDQQuality: Int?
    public var resultPDQ: String?
    public var resultPDQQuality: Int?
    public var sourcePDQDihedral: [String]?
    /// Whether the result scores below its format step's `min_score`; nil without a target.
    public var resultTargetMissed: Bool?
    /// A JPEG result's chroma sampling (`4:4:4`, `4:2:0`, …; the table's CHECK holds it to those).
    public var resultChroma: String?
    /// The share of its queue it is taken from; nil: the queue's common share.
    public var fairKey: String?
    /// The enqueuer's W3C trace context (the table's checks hold both to the specification).
    public var traceparent: String?
    public var tracestate: String?
    /// The trace its attempts' spans were exported in (32 lowercase hex digits); nil: none.
    public var traceID: String?

    public init(id: Int64) {
        self.id = id
    }

    /// One column: its name in the table and the statements, and the field it goes to.
    public struct Column: Sendable {
        public let name: String
        let field: Field

        /// The field, by the kind of value it holds.
        enum Field: Sendable {
            case id
            case text(WritableKeyPath<JobRow, String?> & Sendable)
            /// jsonb, selected `::text`.
            case json(WritableKeyPath<JobRow, String?> & Sendable)
            /// timestamptz, as PostgreSQL writes it.
            case instant(WritableKeyPath<JobRow, String?> & Sendable)
            case integer(WritableKeyPath<JobRow, Int?> & Sendable)
            /// `result_quality`: an integer held to `ResultMeasures.qualities`.
            case quality(WritableKeyPath<JobRow, Int?> & Sendable)
            /// `result_score`: a real held to `ResultMeasures.scores`.
            case score(WritableKeyPath<JobRow, Double?> & Sendable)
            /// `result_quality_exact`: a real held to `ResultMeasures.qualities` in halves.
            case exactQuality(WritableKeyPath<JobRow, Double?> & Sendable)
            case bigint(WritableKeyPath<JobRow, Int64?> & Sendable)
            case boolean(WritableKeyPath<JobRow, Bool?> & Sendable)
            case textArray(WritableKeyPath<JobRow, [String]?> & Sendable)
            case state
        }

        init(_ name: String, _ field: Field) {
            self.name = name
            self.field = field
        }

        /// What its text is read as (the tests check it against the column's type).
        var kind: QueryParameters.Kind {
            switch field {
            case .id, .integer, .quality, .bigint: .integer
            case .text, .state: .text
            case .json: .json
            case .instant: .timestamp
            case .score, .exactQuality: .float
            case .boolean: .boolean
            case .textArray: .textArray
            }
        }
    }

    /// Every column of `halcyon.jobs`, in the table's order (`showJob` selects `*`). A new column
    /// is added here (and to the statements that need it: the claim's through `Job`).
    public static let schema: [Column] = [
        Column("id", .id), Column("source", .text(\.source)), Column("fallback_sources", .textArray(\.fallbackSources)),
        Column("processors", .text(\.processors)), Column("cache_key", .text(\.cacheKey)), Column("options", .json(\.options)),
        Column("priority", .integer(\.priority)), Column("state", .state), Column("attempt", .integer(\.attempt)),
        Column("max_attempts", .integer(\.maxAttempts)), Column("run_at", .instant(\.runAt)), Column("locked_by", .text(\.lockedBy)),
        Column("locked_until", .instant(\.lockedUntil)), Column("result_key", .text(\.resultKey)),
        Column("result_digest", .text(\.resultDigest)), Column("result_path", .text(\.resultPath)),
        Column("result_bytes", .bigint(\.resultBytes)), Column("result_width", .integer(\.resultWidth)),
        Column("result_height", .integer(\.resultHeight)), Column("result_format", .text(\.resultFormat)),
        Column("result_source", .text(\.resultSource)), Column("cache_hit", .boolean(\.cacheHit)), Column("errors", .json(\.errors)),
        Column("last_error", .text(\.lastError)), Column("created_at", .instant(\.createdAt)), Column("started_at", .instant(\.startedAt)),
        Column("finished_at", .instant(\.finishedAt)), Column("timings", .json(\.timings)), Column("queue", .text(\.queue)),
        Column("unique_key", .text(\.uniqueKey)), Column("tags", .textArray(\.tags)), Column("callback_status", .text(\.callbackStatus)),
        Column("callback_attempts", .integer(\.callbackAttempts)), Column("callback_error", .text(\.callbackError)),
        Column("callback_at", .instant(\.callbackAt)), Column("source_width", .integer(\.sourceWidth)),
        Column("source_height", .integer(\.sourceHeight)), Column("source_format", .text(\.sourceFormat)),
        Column("source_bytes", .bigint(\.sourceBytes)), Column("source_meta", .json(\.sourceMeta)),
        Column("placeholders", .json(\.placeholders)), Column("result_quality", .quality(\.resultQuality)),
        Column("result_score", .score(\.resultScore)), Column("fair_key", .text(\.fairKey)),
        Column("result_target_missed", .boolean(\.resultTargetMissed)), Column("result_chroma", .text(\.resultChroma)),
        Column("traceparent", .text(\.traceparent)), Column("tracestate", .text(\.tracestate)),
        Column("trace_id", .text(\.traceID)), Column("result_quality_exact", .exactQuality(\.resultQualityExact)),
        Column("source_pdq", .text(\.sourcePDQ)), Column("source_pdq_quality", .integer(\.sourcePDQQuality)),
        Column("result_pdq", .text(\.resultPDQ)), Column("result_pdq_quality", .integer(\.resultPDQQuality)),
        Column("source_pdq_dihedral", .textArray(\.sourcePDQDihedral)), Column("result_manifest", .json(\.resultManifest)),
    ]

    static let columnsByName = Dictionary(uniqueKeysWithValues: schema.map { ($0.name, $0) })

    /// The job columns of `row` (its other columns are its statement's own); nil without an id.
    public init?(_ row: RowReader) {
        guard let id = row.int64("id") else { return nil }
        self.init(id: id)
        for (index, name) in row.columnNames.enumerated() {
            guard let column = Self.columnsByName[name] else { continue }
            set(column, row.value(at: index, as: column.kind))
        }
    }

    private mutating func set(_ column: Column, _ text: String?) {
        switch column.field {
        case .id: break
        case .text(let path), .json(let path), .instant(let path): self[keyPath: path] = text
        case .integer(let path): self[keyPath: path] = text.flatMap { Int($0) }
        case .quality(let path): self[keyPath: path] = text.flatMap(ResultMeasures.quality(text:))
        case .score(let path): self[keyPath: path] = text.flatMap(ResultMeasures.score(text:))
        case .exactQuality(let path):
            self[keyPath: path] = text.flatMap(ResultMeasures.exactQuality(text:)).flatMap { ResultMeasures.exactQuality($0.quality, half: $0.half) }
        case .bigint(let path): self[keyPath: path] = text.flatMap { Int64($0) }
        case .boolean(let path): self[keyPath: path] = text.map { $0 == "t" }
        case .textArray(let path): self[keyPath: path] = text.map(PGRows.parseTextArray)
        case .state: state = text.flatMap(JobState.init(rawValue:))
        }
    }

    /// Column `column`'s value as JSON: numbers, booleans and arrays as such, jsonb parsed (its
    /// text when it does not parse), the rest as strings; null when nil.
    public func json(_ column: Column) -> JSONValue {
        switch column.field {
        case .id: .number(Double(id))
        case .text(let path), .instant(let path): self[keyPath: path].map { .string($0) } ?? .null
        case .json(let path): self[keyPath: path].map { JSONValue.parse($0) ?? .string($0) } ?? .null
        case .integer(let path), .quality(let path): self[keyPath: path].map { .number(Double($0)) } ?? .null
        case .score(let path), .exactQuality(let path): self[keyPath: path].map { .number($0) } ?? .null
        case .bigint(let path): self[keyPath: path].map { .number(Double($0)) } ?? .null
        case .boolean(let path): self[keyPath: path].map { .bool($0) } ?? .null
        case .textArray(let path): self[keyPath: path].map { .array($0.map { .string($0) }) } ?? .null
        case .state: state.map { .string($0.rawValue) } ?? .null
        }
    }

    /// Every column as JSON (`halcyon show --json`).
    public var json: [String: JSONValue] {
        Dictionary(uniqueKeysWithValues: Self.schema.map { ($0.name, json($0)) })
    }
}

extension JobRow: QueryRow {
    /// Every column (`showJob`).
    public static let columns = schema.map(\.name)
}
