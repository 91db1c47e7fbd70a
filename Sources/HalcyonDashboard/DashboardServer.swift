import Foundation
import HalcyonCore
import HalcyonImage
import HalcyonQueue
import HalcyonStore
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

/// `halcyon dashboard`: server-rendered pages over the queue and the store, and the same data
/// as JSON under `/api/`. Each request runs on a thread of its own (`HTTPServer`); database
/// work goes to a few shared connections, each statement under a deadline.
///
/// Routes (a contract): `GET /` overview, `GET /jobs` list, `GET /jobs/ID` one job,
/// `GET /results/SHA256` a stored result, `GET /api/overview`, `GET /api/jobs`,
/// `GET /api/jobs/ID`; `POST /jobs/ID/retry|cancel`, `POST /jobs/retry|cancel` (the list's
/// filter), `GET|POST /login`.
public final class DashboardServer: Sendable {
    public let configuration: DashboardConfiguration
    private let server: Mutex<HTTPServer?>
    private let security: DashboardSecurity
    private let connections: [PGConnection]
    private let next = Atomic<Int>(0)
    private let store: DiskStore?
    private let logger: Logger
    public let port: Int

    /// The address to open in a browser.
    public var url: String { "http://\(configuration.address):\(port)/" }

    /// Connects to the database and starts listening; throws when either fails.
    public init(configuration: DashboardConfiguration, conninfo: String, logger: Logger) async throws {
        if let problem = configuration.problem { throw HalcyonError(.internal, problem) }
        self.configuration = configuration
        self.logger = logger
        var connections: [PGConnection] = []
        for i in 0..<configuration.connections {
            connections.append(
                try await PGConnection.connect(conninfo, label: "dashboard.\(i)", statementTimeout: configuration.statementTimeout.seconds))
        }
        self.connections = connections
        store = configuration.storeRoot.map { DiskStore(root: $0) }
        server = Mutex<HTTPServer?>(nil)
        // The port is known once listening, and the Host check needs it: bind first, then serve.
        let box = HandlerBox()
        let http = try HTTPServer(host: configuration.address, port: configuration.port) { request in
            box.handler.withLock { $0 }?(request) ?? .text(503, "starting\n")
        }
        port = http.port
        security = DashboardSecurity(token: configuration.authToken, port: http.port)
        server.withLock { $0 = http }  // all stored properties are set: `self` may be used
        box.handler.withLock { $0 = { [weak self] in self?.respond($0) ?? .text(503, "stopped\n") } }
    }

    private final class HandlerBox: Sendable {
        let handler = Mutex<HTTPServer.RequestHandler?>(nil)
    }

    public func stop() {
        server.withLock { $0?.stop() }
    }

    // MARK: Routing

    /// Answers one request as the socket would, minus the socket (the bench times pages with
    /// it). Blocks: call from a thread that may wait, not the cooperative pool.
    public func respond(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let started = ContinuousClock.now
        var response = route(request)
        for (k, v) in DashboardSecurity.headers where response.headers[k] == nil { response.headers[k] = v }
        if response.headers["Cache-Control"] == nil { response.headers["Cache-Control"] = "no-store" }
        let ms = (ContinuousClock.now - started).seconds * 1000
        logger.debug(
            "dashboard request",
            metadata: [
                "method": "\(request.method)", "path": "\(request.path ?? "?")", "status": "\(response.status)",
                "ms": "\(String(format: "%.1f", ms))",
            ])
        return response
    }

    private func route(_ request: HTTPServer.Request) -> HTTPServer.Response {
        guard let path = request.path else { return .text(400, "bad path\n") }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let method = request.method == "HEAD" ? "GET" : request.method

        if method == "GET", parts.first == "assets" {
            switch parts.dropFirst().first {
            case "dashboard.css": return asset(Assets.css, "text/css; charset=utf-8")
            case "dashboard.js": return asset(Assets.js, "text/javascript; charset=utf-8")
            default: return .text(404, "not found\n")
            }
        }

        let access = security.access(request)
        let isAPI = parts.first == "api"
        switch access {
        case .wrongHost:
            logger.notice("dashboard: refused a request for another host", metadata: ["host": "\(request.header("host") ?? "(none)")"])
            return .text(403, "this dashboard answers to 127.0.0.1 and localhost only (a different Host header was sent)\n")
        case .proxied(let header):
            logger.notice("dashboard: refused a proxied request (no token is set)", metadata: ["header": "\(header)"])
            return .text(
                403,
                "this dashboard has no token, so it answers only requests made on this machine directly; this one came through a proxy (\(header)). Start it with --auth-token (or HALCYON_DASHBOARD_TOKEN) to serve it behind a proxy.\n"
            )
        case .signIn:
            if parts.first == "login" { return login(request) }
            if isAPI || method != "GET" { return json(401, ["error": "sign in: send Authorization: Bearer TOKEN"]) }
            return redirect("/login" + HTML.query([("next", path)]))
        case .allowed:
            break
        }
        if parts.first == "login" { return redirect("/") }

        if method == "POST" {
            guard security.mayChange(request, access: access) else {
                logger.notice("dashboard: refused a POST without a valid form token", metadata: ["path": "\(path)"])
                return .text(403, "refused: the form token is missing or stale (reload the page), or the request came from another site\n")
            }
            return act(parts, request)
        }
        guard method == "GET" else { return .text(405, "method not allowed\n") }

        do {
            switch (parts.first ?? "", parts.count) {
            case ("", 1): return try overview(request, api: false)
            case ("jobs", 1): return try jobs(request, api: false)
            case ("jobs", 2): return try job(parts[1], request, api: false)
            case ("results", 2): return result(parts[1])
            case ("api", 2) where parts[1] == "overview": return try overview(request, api: true)
            case ("api", 2) where parts[1] == "jobs": return try jobs(request, api: true)
            case ("api", 3) where parts[1] == "jobs": return try job(parts[2], request, api: true)
            default:
                return isAPI ? json(404, ["error": "no such route"]) : page(404, "Not found", "<h1>Not found</h1><p>No page at this address.</p>")
            }
        } catch let refusal as DashboardRefusal {
            return isAPI
                ? json(refusal.status, ["error": .string(refusal.message)])
                : page(refusal.status, "Error", "<p class=\"error\">\(HTML.escape(refusal.message))</p>")
        } catch {
            logger.error("dashboard: a page failed", metadata: ["path": "\(path)", "error": "\(error)"])
            let message = "the database did not answer: \(error)"
            return isAPI ? json(503, ["error": .string(message)]) : page(503, "Unavailable", "<p class=\"error\">\(HTML.escape(message))</p>")
        }
    }

    // MARK: Pages

    private func overview(_ request: HTTPServer.Request, api: Bool) throws -> HTTPServer.Response {
        let c = connection()
        let cap = configuration.countCap, deadAfter = configuration.deadAfter.seconds
        let o = try wait { try await QueueOverview.load(c, cap: cap, deadAfter: deadAfter) }
        if api { return json(200, o.json) }
        return page(200, "Overview", OverviewPage.render(o, now: Date()), request: request, live: true, active: "Overview")
    }

    private func jobs(_ request: HTTPServer.Request, api: Bool) throws -> HTTPServer.Response {
        let query = request.query
        let filter = try JobsFilter(query)
        var before: Int64?
        if let b = query.last(where: { $0.name == "before" })?.value, !b.isEmpty {
            guard let id = Int64(b), id > 0 else { throw DashboardRefusal(400, "before must be a job id") }
            before = id
        }
        let queue = JobQueue(connection: connection())
        let size = configuration.pageSize, cap = min(configuration.countCap, 10_000), first = before
        let (page, matching) = try wait {
            (try await queue.list(filter.jobFilter, before: first, limit: size), try await queue.count(filter.jobFilter, cap: cap))
        }
        if api {
            let next: JSONValue = page.nextBefore.map { .number(Double($0)) } ?? .null
            let body: JSONValue = [
                "matching": .number(Double(min(matching, cap))), "matching_capped": .bool(matching > cap), "next_before": next,
                "jobs": .array(page.jobs.map(Self.json)),
            ]
            return json(200, body)
        }
        let notice = Self.notice(query)
        return self.page(
            200, "Jobs",
            JobsPage.render(filter: filter, page: page, matching: matching, cap: cap, before: before, csrf: security.csrf, notice: notice),
            request: request, live: true, active: "Jobs")
    }

    private func job(_ idText: String, _ request: HTTPServer.Request, api: Bool) throws -> HTTPServer.Response {
        guard let id = Int64(idText), id > 0 else { throw DashboardRefusal(404, "no job '\(idText)': job ids are positive integers") }
        let c = connection()
        let queue = JobQueue(connection: c)
        let (row, presets) = try wait { (try await queue.show(id: id), try await queue.presets()) }
        guard let row else { throw DashboardRefusal(404, "no job \(id)") }
        if api {
            return json(200, .object(Dictionary(uniqueKeysWithValues: row.map { k, v in (k, v.map { Self.columnJSON(k, $0) } ?? .null) })))
        }
        let processors = (row["processors"] ?? nil) ?? ""
        let identifier: Result<String, HalcyonError>
        do {
            let chain = try ProcessorChain.parse(
                processors, presets: Dictionary(presets.map { ($0.name, $0.processors) }, uniquingKeysWith: { a, _ in a }))
            identifier = .success(chain.identifier)
        } catch {
            identifier = .failure(error)
        }
        var expires: Date?
        var inStore = false
        // The expiry from the object's inode; the image itself is fetched by the page's <img>.
        if let digest = row["result_digest"] ?? nil, let info = store?.objectInfo(digest: digest), info.bytes <= configuration.maxResultBytes {
            expires = info.expires
            inStore = true
        }
        let model = JobPage.Model(row: row, identifier: identifier, resultExpires: expires, resultInStore: inStore)
        return page(
            200, "Job \(id)", JobPage.render(model, csrf: security.csrf, notice: Self.notice(request.query)), request: request, live: true,
            active: "Jobs")
    }

    /// A stored result by its content address: only a digest is taken from the request, and the
    /// store builds the path from it (see `DiskStore.object(digest:maxBytes:)`).
    private func result(_ digest: String) -> HTTPServer.Response {
        guard DiskStore.isDigest(digest) else { return .text(404, "not a result digest (64 lower-case hex digits)\n") }
        guard let store else { return .text(404, "this dashboard has no store\n") }
        guard let object = store.object(digest: digest, maxBytes: configuration.maxResultBytes) else {
            return .text(404, "no stored result with this digest\n")
        }
        let left = max(0, Int(object.expires.timeIntervalSinceNow))
        return HTTPServer.Response(
            status: 200, contentType: Self.mimeTypes[object.format] ?? "application/octet-stream",
            headers: [
                "Cache-Control": "private, max-age=\(min(left, 86400))", "ETag": "\"\(digest)\"", "Expires-At": ISO8601.format(object.expires),
            ],
            body: object.data)
    }

    static let mimeTypes: [ImageFormat: String] = [
        .jpeg: "image/jpeg", .png: "image/png", .gif: "image/gif", .webp: "image/webp", .avif: "image/avif", .heic: "image/heic",
        .tiff: "image/tiff", .bmp: "image/bmp",
    ]

    // MARK: Actions

    private func act(_ parts: [String], _ request: HTTPServer.Request) -> HTTPServer.Response {
        let queue = JobQueue(connection: connection())
        do {
            switch (parts.first ?? "", parts.count) {
            case ("jobs", 3) where parts[2] == "retry" || parts[2] == "cancel":
                guard let id = Int64(parts[1]), id > 0 else { throw DashboardRefusal(404, "no job '\(parts[1])'") }
                let retry = parts[2] == "retry"
                let done = try wait { retry ? try await queue.retry(ids: [id]) : try await queue.cancel(ids: [id]) }
                logger.info("dashboard: \(retry ? "retry" : "cancel") of job \(id)", metadata: ["changed": "\(done.count)"])
                let outcome = done.isEmpty ? "\(parts[2])-none" : (retry ? "retried" : "cancelled")
                return redirect("/jobs/\(id)" + HTML.query([("done", outcome), ("n", String(done.count))]))
            case ("jobs", 2) where parts[1] == "retry" || parts[1] == "cancel":
                let filter = try JobsFilter(request.form)
                let retry = parts[1] == "retry"
                let n = try wait { retry ? try await queue.retry(filter.jobFilter) : try await queue.cancel(filter.jobFilter) }
                logger.info("dashboard: bulk \(parts[1])", metadata: ["filter": "\(HTML.query(filter.fields))", "changed": "\(n)"])
                return redirect("/jobs" + HTML.query(filter.fields + [("done", retry ? "retried" : "cancelled"), ("n", String(n))]))
            default:
                return .text(404, "no such action\n")
            }
        } catch let refusal as DashboardRefusal {
            return .text(refusal.status, refusal.message + "\n")
        } catch {
            logger.error("dashboard: an action failed", metadata: ["error": "\(error)"])
            return .text(503, "the database did not answer: \(error)\n")
        }
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

    private func login(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let next = Self.localPath(
            request.method == "POST"
                ? request.form.last(where: { $0.name == "next" })?.value : request.query.last(where: { $0.name == "next" })?.value)
        if request.method == "POST" {
            let token = request.form.last(where: { $0.name == "token" })?.value ?? ""
            if security.signIn(with: token), let cookie = security.sessionCookieHeader {
                logger.info("dashboard: signed in")
                var r = redirect(next)
                r.headers["Set-Cookie"] = cookie
                return r
            }
            logger.notice("dashboard: a sign-in with a wrong token")
            return page(401, "Sign in", LoginPage.render(next: next, failed: true))
        }
        return page(200, "Sign in", LoginPage.render(next: next, failed: false))
    }

    /// `next` when it is a path on this site, else `/` (no open redirect to another host): one
    /// `/`, then only the characters of a URL's path and query (RFC 3986; `%` escapes kept as
    /// they are). Anything else is refused, not cleaned: browsers drop tabs and newlines and read
    /// `\` as `/`, so `/<TAB>/evil.example` or `/\evil.example` would leave the site.
    static func localPath(_ next: String?) -> String {
        guard let next, next.hasPrefix("/"), next.count <= 2048 else { return "/" }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/?%")
        guard next.allSatisfy({ allowed.contains($0) }), !next.dropFirst().hasPrefix("/") else { return "/" }
        return next
    }

    // MARK: Plumbing

    private func connection() -> PGConnection {
        connections[next.add(1, ordering: .relaxed).oldValue % connections.count]
    }

    private func page(
        _ status: Int, _ title: String, _ main: String, request: HTTPServer.Request? = nil, live: Bool = false, active: String = ""
    ) -> HTTPServer.Response {
        // The live script asks for <main> alone.
        if request?.header("x-halcyon-partial") == "1" {
            return HTTPServer.Response(status: status, contentType: "text/html; charset=utf-8", body: Data(main.utf8))
        }
        let interval = live ? Int(configuration.liveInterval.seconds.rounded()) : nil
        let html = HTML.page(title: title, active: active, live: interval.flatMap { $0 > 0 ? $0 : nil }, main: main)
        return HTTPServer.Response(status: status, contentType: "text/html; charset=utf-8", body: Data(html.utf8))
    }

    private func json(_ status: Int, _ value: JSONValue) -> HTTPServer.Response {
        HTTPServer.Response(status: status, contentType: "application/json", body: Data((value.jsonText + "\n").utf8))
    }

    private func redirect(_ location: String) -> HTTPServer.Response {
        HTTPServer.Response(status: 303, headers: ["Location": location], body: Data())
    }

    private func asset(_ text: String, _ type: String) -> HTTPServer.Response {
        HTTPServer.Response(status: 200, contentType: type, headers: ["Cache-Control": "max-age=300"], body: Data(text.utf8))
    }

    /// Runs async database work from this connection's thread (never the cooperative pool).
    private func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            outcome.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
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

    static let jsonColumns: Set<String> = ["options", "errors", "timings", "source_meta", "placeholders"]
    static let arrayColumns: Set<String> = ["tags", "fallback_sources"]
    static let numberColumns: Set<String> = [
        "id", "priority", "attempt", "max_attempts", "result_bytes", "result_width", "result_height", "callback_attempts", "source_width",
        "source_height", "source_bytes",
    ]

    /// A `show` column as JSON: jsonb columns parsed, text arrays as arrays, the rest as text.
    static func columnJSON(_ column: String, _ text: String) -> JSONValue {
        if jsonColumns.contains(column), let parsed = JSONValue.parse(text) { return parsed }
        if arrayColumns.contains(column) { return .array(PGRows.parseTextArray(text).map { .string($0) }) }
        if numberColumns.contains(column), let n = Double(text) { return .number(n) }
        if column == "cache_hit" { return .bool(text == "t") }
        return .string(text)
    }
}
