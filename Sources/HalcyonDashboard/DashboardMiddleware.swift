import Foundation
import HalcyonHTTP
import HalcyonRuntime
import Hummingbird
import Logging

// The dashboard's middleware, outermost first: `DashboardResponses` (what every response
// carries, and the answer when no route matches), `DashboardAccess` (the Host check, proxies,
// tokens and sign-in), `DashboardChanges` (roles and the form token on every POST).

/// Every response: the security headers (CSP and friends) and `Cache-Control: no-store` unless
/// the route set its own; no body for `HEAD`; the answer for what no route takes (404 page or
/// JSON for a `GET`, 404 text for a `POST` — "no such action" —, 405 for other methods); a
/// debug line per request with its time.
struct DashboardResponses: RouterMiddleware {
    let app: DashboardApp

    func handle(
        _ request: Request, context: DashboardContext, next: (Request, DashboardContext) async throws -> Response
    ) async throws
        -> Response
    {
        let started = ContinuousClock.now
        var context = context
        context.uploadLimit = app.configuration.serverSettings.maxBodyBytes
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            response = notFound(request)
        } catch let error as any HTTPResponseError {
            // A body over the upload limit (the guard refuses declared ones before this), or
            // another of Hummingbird's own refusals.
            let text = error.status == .contentTooLarge ? "request body over \(context.uploadLimit) bytes" : error.status.reasonPhrase
            response = .text(error.status, text + "\n")
        } catch {
            app.logger.error("dashboard: a request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            response = .text(.internalServerError, "internal error\n")
        }
        for (name, value) in DashboardSecurity.headers where response.headers[name] == nil { response.headers[name] = value }
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        let ms = (ContinuousClock.now - started).seconds * 1000
        app.logger.debug(
            "dashboard request",
            metadata: [
                "method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(response.status.code)",
                "ms": "\(String(format: "%.1f", ms))",
            ])
        return request.method == .head ? response.createHeadResponse() : response
    }

    private func notFound(_ request: Request) -> Response {
        switch request.method {
        case .get, .head:
            let isAPI = request.uri.path.removingPercentEncoding?.hasPrefix("/api/") == true
            return isAPI ? app.json(.notFound, ["error": "no such route"]) : app.message(.notFound, heading: "Not found", "No page at this address.")
        case .post:
            return .text(.notFound, "no such action\n")
        default:
            return .text(.methodNotAllowed, "method not allowed\n")
        }
    }
}

/// Who is asking (`DashboardSecurity.access`): a request for another `Host` (DNS rebinding) or,
/// without a token, one a proxy forwarded is refused (403, with the reason); one not signed in
/// is sent to `/login` (a page) or answered 401 (the API, any other method); a signed-in
/// request for `/login` goes to `/`. The stylesheet and script under `/assets/` are served to
/// anyone. A path that does not percent-decode is a 400.
struct DashboardAccess: RouterMiddleware {
    let app: DashboardApp

    func handle(
        _ request: Request, context: DashboardContext, next: (Request, DashboardContext) async throws -> Response
    ) async throws
        -> Response
    {
        guard let path = request.uri.path.removingPercentEncoding else { return .text(.badRequest, "bad path\n") }
        let first = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().first ?? ""
        let isGet = request.method == .get || request.method == .head
        if isGet && first == "assets" { return try await next(request, context) }
        var context = context
        let access = app.security.access(request.head, port: context.port)
        context.access = access
        switch access {
        case .wrongHost:
            app.logger.notice(
                "dashboard: refused a request for another host", metadata: ["host": "\(DashboardSecurity.host(request.head) ?? "(none)")"])
            return .text(.forbidden, "this dashboard answers to 127.0.0.1 and localhost only (a different Host header was sent)\n")
        case .proxied(let header):
            app.logger.notice("dashboard: refused a proxied request (no token is set)", metadata: ["header": "\(header)"])
            return .text(
                .forbidden,
                "this dashboard has no token, so it answers only requests made on this machine directly; this one came through a proxy (\(header)). Start it with --auth-token (or HALCYON_DASHBOARD_TOKEN) to serve it behind a proxy.\n"
            )
        case .signIn:
            if first == "login" { return try await next(request, context) }
            if first == "api" || !isGet { return app.json(.unauthorized, ["error": "sign in: send Authorization: Bearer TOKEN"]) }
            return DashboardApp.redirect("/login" + Format.query([("next", path)]))
        case .allowed:
            if first == "login" { return DashboardApp.redirect("/") }
            return try await next(request, context)
        }
    }
}

/// A POST changes state only for the operator (a viewer gets 403 and why), and only with the
/// page's form token or a Bearer header, never from another site (`DashboardSecurity.mayChange`).
/// Reads the form (up to the upload limit) for the route.
struct DashboardChanges: RouterMiddleware {
    let app: DashboardApp

    func handle(
        _ request: Request, context: DashboardContext, next: (Request, DashboardContext) async throws -> Response
    ) async throws
        -> Response
    {
        guard request.method == .post, let access = context.access, let role = context.role else { return try await next(request, context) }
        var request = request, context = context
        let form = try await DashboardApp.form(&request, context)
        context.form = form
        guard role == .operator else {
            app.logger.notice("dashboard: refused a change by a viewer", metadata: ["path": "\(request.uri.path)"])
            return .text(
                .forbidden,
                "refused: this is a viewer's session (the viewer token sees everything and changes nothing); retry and cancel need the operator token (--auth-token)\n"
            )
        }
        guard app.security.mayChange(request.head, form: form, access: access) else {
            app.logger.notice("dashboard: refused a POST without a valid form token", metadata: ["path": "\(request.uri.path)"])
            return .text(.forbidden, "refused: the form token is missing or stale (reload the page), or the request came from another site\n")
        }
        return try await next(request, context)
    }
}
