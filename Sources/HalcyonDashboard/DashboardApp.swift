import Foundation
import HTTPTypes
import HalcyonChain
import HalcyonDomain
import HalcyonHTTP
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import Hummingbird
import Logging
import Synchronization

/// A request the dashboard refuses, with the status and message to answer.
struct DashboardRefusal: Error {
    var status: Int
    var message: String
    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
}

/// The dashboard's routes and what they share: the configuration, the security checks, a few
/// database connections and the store. Route handlers run as Swift tasks: a database statement
/// runs on its connection's own thread (`PGConnection`, libpq) and a store read on Halcyon's
/// I/O threads (`Blocking`), so neither an event loop nor the cooperative pool waits on them.
struct DashboardApp: Sendable {
    let configuration: DashboardConfiguration
    let security: DashboardSecurity
    let logger: Logger
    private let connections: [PGConnection]
    private let next = Counter()
    private let store: (any ResultStore)?
    private let streams: ResultStreams

    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    init(configuration: DashboardConfiguration, connections: [PGConnection], logger: Logger) {
        self.configuration = configuration
        self.connections = connections
        self.logger = logger
        security = DashboardSecurity(token: configuration.authToken, viewerToken: configuration.viewerToken)
        // Checked by `DashboardConfiguration.validate()` before any app is made.
        store = try? configuration.store?.open()
        streams = ResultStreams(limit: configuration.maxResultStreams, stallTimeout: configuration.resultStallTimeout)
    }

    // MARK: Routes

    /// Every route (a contract: see `DashboardServer`), behind the middleware.
    func router() -> Router<DashboardContext> {
        let router = Router(context: DashboardContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: DashboardResponses(app: self))
        router.add(middleware: DashboardAccess(app: self))
        router.add(middleware: DashboardChanges(app: self))

        router.get("/assets/**") { _, context in
            switch context.parameters.getCatchAll().first {
            case "dashboard.css": Self.asset(Assets.css, "text/css; charset=utf-8")
            case "dashboard.js": Self.asset(Assets.js, "text/javascript; charset=utf-8")
            default: Response.text(.notFound, "not found\n")
            }
        }
        router.get("/") { request, _ in await page(request, api: false) { try await overview(request, api: false) } }
        router.get("/jobs") { request, context in await page(request, api: false) { try await jobs(request, context, api: false) } }
        router.get("/jobs/:id") { request, context in
            await page(request, api: false) { try await job(Self.parameter(context, "id"), request, context, api: false) }
        }
        router.get("/results/:digest") { request, context in await result(Self.parameter(context, "digest"), request, context) }
        router.get("/usage") { request, _ in await page(request, api: false) { try await usage(request, api: false) } }
        router.get("/api/overview") { request, _ in await page(request, api: true) { try await overview(request, api: true) } }
        router.get("/api/usage") { request, _ in await page(request, api: true) { try await usage(request, api: true) } }
        router.get("/api/jobs") { request, context in await page(request, api: true) { try await jobs(request, context, api: true) } }
        router.get("/api/jobs/:id") { request, context in
            await page(request, api: true) { try await job(Self.parameter(context, "id"), request, context, api: true) }
        }
        router.post("/jobs/:id/retry") { _, context in await act { try await one(Self.parameter(context, "id"), retry: true) } }
        router.post("/jobs/:id/cancel") { _, context in await act { try await one(Self.parameter(context, "id"), retry: false) } }
        router.post("/jobs/retry") { _, context in await act { try await bulk(context, retry: true) } }
        router.post("/jobs/cancel") { _, context in await act { try await bulk(context, retry: false) } }
        router.get("/login") { request, context in try await login(request, context) }
        router.post("/login") { request, context in try await login(request, context) }
        return router
    }

    // MARK: Pages

    /// Runs a page or API route: a refusal becomes its status and message (a page or JSON), any
    /// other error a 503 that says the database did not answer.
    private func page(_ request: Request, api: Bool, _ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let refusal as DashboardRefusal {
            let status = HTTPResponse.Status(code: refusal.status)
            return api ? json(status, ["error": .string(refusal.message)]) : message(status, refusal.message, request: request)
        } catch {
            logger.error("dashboard: a page failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            let text = "the database did not answer: \(error)"
            return api
                ? json(.serviceUnavailable, ["error": .string(text)]) : message(.serviceUnavailable, text, request: request, title: "Unavailable")
        }
    }

    private func overview(_ request: Request, api: Bool) async throws -> Response {
        let o = try await QueueOverview.load(connection(), cap: configuration.countCap, deadAfter: configuration.deadAfter.seconds)
        if api { return json(.ok, o.json) }
        return page(.ok, "Overview", OverviewPage(o, now: Date()).render(), request: request, live: true, active: "Overview")
    }

    /// `/usage`: one page of each queue's and fair key's usage over the last 24 hours or 7 days,
    /// largest first (`UsagePage.Query`): summed, ordered and cut to a page in the database.
    private func usage(_ request: Request, api: Bool) async throws -> Response {
        let now = Date()
        let query = try UsagePage.Query(HTTPForm.query(request))
        let report = try await JobQueue(connection: connection()).usage(query.request(limit: configuration.pageSize, now: now))
        if api { return json(.ok, UsagePage.json(report, query: query)) }
        return page(.ok, "Usage", UsagePage(report, query: query, now: now).render(), request: request, live: false, active: "Usage")
    }

    private func jobs(_ request: Request, _ context: DashboardContext, api: Bool) async throws -> Response {
        let query = HTTPForm.query(request)
        let filter = try JobsFilter(query)
        var before: Int64?
        if let b = query.last(where: { $0.name == "before" })?.value, !b.isEmpty {
            guard let id = Int64(b), id > 0 else { throw DashboardRefusal(400, "before must be a job id") }
            before = id
        }
        let queue = JobQueue(connection: connection())
        let cap = min(configuration.countCap, 10_000)
        let page = try await queue.list(filter.jobFilter, before: before, limit: configuration.pageSize)
        let matching = try await queue.count(filter.jobFilter, cap: cap)
        if api {
            let next: JSONValue = page.nextBefore.map { .number(Double($0)) } ?? .null
            let body: JSONValue = [
                "matching": .number(Double(min(matching, cap))), "matching_capped": .bool(matching > cap), "next_before": next,
                "jobs": .array(page.jobs.map(Self.json)),
            ]
            return json(.ok, body)
        }
        let view = JobsPage(
            filter: filter, page: page, matching: matching, cap: cap, before: before, csrf: csrf(context), notice: Self.notice(query))
        return self.page(.ok, "Jobs", view.render(), request: request, live: true, active: "Jobs")
    }

    private func job(_ idText: String, _ request: Request, _ context: DashboardContext, api: Bool) async throws -> Response {
        guard let id = Int64(idText), id > 0 else { throw DashboardRefusal(404, "no job '\(idText)': job ids are positive integers") }
        let queue = JobQueue(connection: connection())
        guard let row = try await queue.job(id: id) else { throw DashboardRefusal(404, "no job \(id)") }
        if api { return json(.ok, .object(row.json)) }
        let presets = try await queue.presets()
        let processors = row.processors ?? ""
        let identifier: Result<String, HalcyonError>
        do {
            let chain = try Chain.parse(
                processors, presets: Dictionary(presets.map { ($0.name, $0.processors) }, uniquingKeysWith: { a, _ in a }))
            identifier = .success(chain.identifier)
        } catch {
            identifier = .failure(error)
        }
        // The expiry from the object's inode; the image itself is fetched by the page's <img>.
        var expires: Date?
        var inStore = false
        if let digest = row.resultDigest, let store {
            let limit = configuration.maxResultBytes
            if let info = await store.objectInfo(digest: digest), info.bytes <= limit {
                expires = info.expires
                inStore = true
            }
        }
        // The trace its spans went to, else the enqueuer's; only an id of the W3C format (the
        // table's checks; a row edited past them is shown, not linked).
        let traceLink = JobPage.traceID(of: row).flatMap { TraceContext.isValid(traceID: $0) ? $0 : nil }.flatMap(configuration.traceLink)
        var model = JobPage.Model(row: row, identifier: identifier, resultExpires: expires, resultInStore: inStore, traceLink: traceLink)
        if row.sourcePDQ != nil {
            model.similar = try await queue.similarImages(
                toJob: id, maxDistance: PerceptualHash.matchDistance, dihedral: row.sourcePDQDihedral != nil, limit: JobPage.similarShown)
        }
        let view = JobPage(model, csrf: csrf(context), notice: Self.notice(HTTPForm.query(request)))
        return page(.ok, "Job \(id)", view.render(), request: request, live: true, active: "Jobs")
    }

    /// A stored result by its content address: only a digest is taken from the request, and the
    /// store builds the path from it (see `DiskStore.openObject(digest:maxBytes:)`). The bytes
    /// are streamed a chunk at a time (`ResultStreams`), at most `maxResultStreams` at once
    /// (`503` with `Retry-After` beyond); a `HEAD`, or a request whose `If-None-Match` names
    /// the digest (`304`), reads the object's facts only and takes no stream.
    private func result(_ digest: String, _ request: Request, _ context: DashboardContext) async -> Response {
        guard StoreLayout.isDigest(digest) else { return .text(.notFound, "not a result digest (64 lower-case hex digits)\n") }
        guard let store else { return .text(.notFound, "this dashboard has no store\n") }
        let limit = configuration.maxResultBytes
        let notFound = Response.text(.notFound, "no stored result with this digest\n")
        let unchanged = Self.names(request.headers[.ifNoneMatch], digest)
        if request.method == .head || unchanged {
            guard let info = await store.objectInfo(digest: digest), info.bytes <= limit else { return notFound }
            var headers = Self.resultHeaders(digest, format: info.format, expires: info.expires)
            if unchanged {
                var response = Response(status: .notModified, headers: headers)
                response.headers[.contentLength] = nil
                response.headers[.contentType] = nil
                return response
            }
            headers[.contentLength] = String(info.bytes)
            return Response(status: .ok, headers: headers)
        }
        guard let slot = streams.take() else {
            logger.notice("dashboard: refused a result: every stream is taken", metadata: ["limit": "\(streams.limit)"])
            return .text(
                .serviceUnavailable,
                "\(streams.limit) results are being sent already (--max-result-streams); try again in a few seconds\n",
                headers: [.retryAfter: String(Self.retryAfterSeconds)])
        }
        let reader: (any ObjectReader)?
        do {
            reader = try await store.openObject(digest: digest, maxBytes: limit)
        } catch {
            logger.warning("dashboard: the store could not open a result", metadata: ["digest": "\(digest)", "error": "\(error)"])
            reader = nil
        }
        guard let reader else { return notFound }
        let body = streams.body(reader, slot: slot, channel: context.channel, logger: logger)
        return Response(status: .ok, headers: Self.resultHeaders(digest, format: reader.format, expires: reader.expires), body: body)
    }

    /// What a `503` for a result asks the client to wait, in seconds.
    static let retryAfterSeconds = 5

    /// A result's headers: its type, `Cache-Control: private` up to its expiry (a day at most),
    /// its `ETag` (the digest) and `Expires-At`.
    static func resultHeaders(_ digest: String, format: ImageFormat, expires: Date) -> HTTPFields {
        let left = max(0, Int(expires.timeIntervalSinceNow))
        return [
            .contentType: format.mediaType, .cacheControl: "private, max-age=\(min(left, 86400))",
            .eTag: "\"\(digest)\"", expiresAt: ISO8601.format(expires),
        ]
    }

    /// Whether an `If-None-Match` value names the result `digest` (its ETag, strong or weak, or `*`).
    static func names(_ ifNoneMatch: String?, _ digest: String) -> Bool {
        guard let ifNoneMatch else { return false }
        return ifNoneMatch.split(separator: ",").contains { tag in
            var t = tag.trimmingCharacters(in: .whitespaces)
            if t.hasPrefix("W/") { t.removeFirst(2) }
            return t == "*" || t == "\"\(digest)\""
        }
    }

    static let expiresAt = HTTPField.Name("Expires-At")!

    // MARK: Actions

    /// Runs an action: a refusal becomes its status and message, any other error a 503.
    private func act(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let refusal as DashboardRefusal {
            return .text(HTTPResponse.Status(code: refusal.status), refusal.message + "\n")
        } catch {
            logger.error("dashboard: an action failed", metadata: ["error": "\(error)"])
            return .text(.serviceUnavailable, "the database did not answer: \(error)\n")
        }
    }

    /// `POST /jobs/ID/retry|cancel`.
    private func one(_ idText: String, retry: Bool) async throws -> Response {
        let action = retry ? "retry" : "cancel"
        guard let id = Int64(idText), id > 0 else { throw DashboardRefusal(404, "no job '\(idText)'") }
        let queue = JobQueue(connection: connection())
        let done = retry ? try await queue.retry(ids: [id]) : try await queue.cancel(ids: [id])
        logger.info("dashboard: \(action) of job \(id)", metadata: ["changed": "\(done.count)"])
        let outcome = done.isEmpty ? "\(action)-none" : (retry ? "retried" : "cancelled")
        return Self.redirect("/jobs/\(id)" + Format.query([("done", outcome), ("n", String(done.count))]))
    }

    /// `POST /jobs/retry|cancel`: every job the list's filter (the form's fields) matches.
    private func bulk(_ context: DashboardContext, retry: Bool) async throws -> Response {
        let filter = try JobsFilter(context.form ?? [])
        let queue = JobQueue(connection: connection())
        let n = retry ? try await queue.retry(filter.jobFilter) : try await queue.cancel(filter.jobFilter)
        logger.info("dashboard: bulk \(retry ? "retry" : "cancel")", metadata: ["filter": "\(Format.query(filter.fields))", "changed": "\(n)"])
        return Self.redirect("/jobs" + Format.query(filter.fields + [("done", retry ? "retried" : "cancelled"), ("n", String(n))]))
    }

    /// The outcome line after an action, from a closed set (the query cannot put words on the page).
    static func notice(_ query: [(name: String, value: String)]) -> String? {
        guard let done = query.last(where: { $0.name == "done" })?.value else { return nil }
        let n = Int(query.last(where: { $0.name == "n" })?.value ?? "") ?? 0
        switch done {
        case "retried": return n == 1 ? "Retried 1 job." : "Retried \(n) jobs."
        case "cancelled": return n == 1 ? "Cancelled 1 job." : "Cancelled \(n) jobs."
        case "retry-none": return "Nothing to retry: only failed or cancelled jobs can be retried (or its unique key is held by another job)."
        case "cancel-none": return "Nothing to cancel: only queued or running jobs can be cancelled."
        default: return nil
        }
    }

    // MARK: Sign-in

    /// `GET|POST /login`, reached only while not signed in (`DashboardAccess`).
    private func login(_ request: Request, _ context: DashboardContext) async throws -> Response {
        var request = request
        let post = request.method == .post
        let form = post ? try await Self.form(&request, context) : []
        let next = Self.localPath((post ? form : HTTPForm.query(request)).last(where: { $0.name == "next" })?.value)
        if post {
            let token = form.last(where: { $0.name == "token" })?.value ?? ""
            if let role = security.signIn(with: token), let cookie = security.sessionCookieHeader(for: role) {
                logger.info("dashboard: signed in", metadata: ["role": "\(role)"])
                var r = Self.redirect(next)
                r.headers[.setCookie] = cookie
                return r
            }
            logger.notice("dashboard: a sign-in with a wrong token")
            return page(.unauthorized, "Sign in", LoginPage(next: next, failed: true).render(), request: request)
        }
        return page(.ok, "Sign in", LoginPage(next: next, failed: false).render(), request: request)
    }

    /// `next` when it is a path on this site, else `/` (no open redirect to another host).
    ///
    /// The path — up to `?` — is one `/`, then segments of RFC 3986 path characters with no `%`
    /// escape and no `.` or `..` segment; the query, if any, is of query characters, and a `%`
    /// escape in it is two hex digits that do not encode a control character. Anything else is
    /// refused, not cleaned: browsers drop tabs and newlines and read `\` as `/`, so
    /// `/<TAB>/evil.example` or `/\evil.example` would leave the site, and an escaped `/`, `\` or
    /// control character (`/%2F/evil.example`, `/%5Cevil.example`, `/%09/…`) may be decoded by a
    /// proxy or a browser on the way.
    package static func localPath(_ next: String?) -> String {
        guard let next, next.hasPrefix("/"), next.count <= 2048 else { return "/" }
        let pathCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/")
        let parts = next.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts[0]
        guard path.allSatisfy({ pathCharacters.contains($0) }), !path.dropFirst().hasPrefix("/") else { return "/" }
        guard !path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else { return "/" }
        if parts.count > 1 {
            let query = Array(parts[1])
            guard query.allSatisfy({ pathCharacters.contains($0) || $0 == "?" || $0 == "%" }) else { return "/" }
            var i = 0
            while i < query.count {
                if query[i] == "%" {
                    guard i + 2 < query.count, let byte = UInt8(String(query[i + 1...i + 2]), radix: 16), byte >= 0x20, byte != 0x7F else {
                        return "/"
                    }
                    i += 3
                } else {
                    i += 1
                }
            }
        }
        return next
    }

    // MARK: Plumbing

    private func connection() -> PGConnection {
        connections[next.value.add(1, ordering: .relaxed).oldValue % connections.count]
    }

    /// The form token for the page's buttons, or nil for a viewer (who gets none).
    private func csrf(_ context: DashboardContext) -> String? {
        context.role == .viewer ? nil : security.csrf
    }

    /// The route's parameter, percent-decoded (as sent when it does not decode).
    static func parameter(_ context: DashboardContext, _ name: String) -> String {
        let raw = context.parameters.get(name) ?? ""
        return raw.removingPercentEncoding ?? raw
    }

    /// A form post's fields (empty unless its body is `application/x-www-form-urlencoded`), read
    /// up to the context's upload limit (413 beyond).
    static func form(_ request: inout Request, _ context: DashboardContext) async throws -> [(name: String, value: String)] {
        if let form = context.form { return form }
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else { return [] }
        return HTTPForm.fields(String(buffer: body))
    }

    /// A page in the layout, or only its `<main>` when the live script asks for it.
    private func page(
        _ status: HTTPResponse.Status, _ title: String, _ main: String, request: Request, live: Bool = false, active: String = ""
    ) -> Response {
        if request.headers[Self.partial] == "1" { return .body(status, contentType: "text/html; charset=utf-8", Array(main.utf8)) }
        let interval = live ? Int(configuration.liveInterval.seconds.rounded()) : nil
        let html = Views.layout(title: title, active: active, live: interval.flatMap { $0 > 0 ? $0 : nil }, main: main)
        return .body(status, contentType: "text/html; charset=utf-8", Array(html.utf8))
    }

    static let partial = HTTPField.Name("X-Halcyon-Partial")!

    /// A page saying `text`: an error (the default), or with a heading and plain.
    func message(_ status: HTTPResponse.Status, heading: String, _ text: String) -> Response {
        let html = Views.layout(title: heading, active: "", live: nil, main: MessagePage(heading: heading, message: text, error: false).render())
        return .body(status, contentType: "text/html; charset=utf-8", Array(html.utf8))
    }

    private func message(_ status: HTTPResponse.Status, _ text: String, request: Request, title: String = "Error") -> Response {
        page(status, title, MessagePage(heading: nil, message: text, error: true).render(), request: request)
    }

    func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        .body(status, contentType: "application/json", Array((value.jsonText + "\n").utf8))
    }

    static func redirect(_ location: String) -> Response {
        .text(.seeOther, "", headers: [.location: location])
    }

    private static func asset(_ text: String, _ type: String) -> Response {
        .body(.ok, contentType: type, Array(text.utf8), headers: [.cacheControl: "max-age=300"])
    }

    static func json(_ j: JobQueue.ListedJob) -> JSONValue {
        [
            "id": .number(Double(j.id)), "state": .string(j.state.rawValue), "queue": .string(j.queue), "source": .string(j.source),
            "processors": .string(j.processors), "attempt": .number(Double(j.attempt)), "max_attempts": .number(Double(j.maxAttempts)),
            "created_at": .string(j.createdAt), "finished_at": j.finishedAt.map { .string($0) } ?? .null,
            "code": j.code.map { .string($0) } ?? .null, "last_error": j.lastError.map { .string($0) } ?? .null,
            "result_digest": j.resultDigest.map { .string($0) } ?? .null, "result_format": j.resultFormat.map { .string($0) } ?? .null,
            "result_width": j.resultWidth.map { .number(Double($0)) } ?? .null,
            "result_height": j.resultHeight.map { .number(Double($0)) } ?? .null,
            "result_bytes": j.resultBytes.map { .number(Double($0)) } ?? .null, "cache_hit": j.cacheHit.map { .bool($0) } ?? .null,
            "tags": .array(j.tags.map { .string($0) }),
        ]
    }
}
