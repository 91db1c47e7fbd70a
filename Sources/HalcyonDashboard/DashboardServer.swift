import Foundation
import HTTPTypes
import HalcyonHTTP
import HalcyonQueue
import HalcyonRuntime
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization

/// `halcyon dashboard`: server-rendered pages over the queue and the store, and the same data
/// as JSON under `/api/`, served by Hummingbird (`HTTPServerService`, with `HTTPServerSettings`'
/// limits). A ServiceLifecycle `Service`: run it in a `ServiceGroup` (the command does), and a
/// graceful shutdown lets the requests being answered finish. Database work goes to a few
/// shared connections, each statement under a deadline.
///
/// Routes (a contract): `GET /` overview, `GET /jobs` list, `GET /jobs/ID` one job, `GET /usage`,
/// `GET /results/SHA256` a stored result, `GET /api/overview`, `GET /api/jobs`, `GET /api/usage`,
/// `GET /api/jobs/ID`; `POST /jobs/ID/retry|cancel`, `POST /jobs/retry|cancel` (the list's
/// filter), `GET|POST /login`; `GET /assets/dashboard.css|js`. `HEAD` answers as `GET` without
/// the body. Middleware (`DashboardMiddleware.swift`) checks the Host, the token and its role,
/// and the form token, and adds the security headers.
public final class DashboardServer: Service, Sendable, CustomStringConvertible {
    /// Its name only: ServiceLifecycle logs each service's description, and a reflected one
    /// would print the whole configuration (secrets included) and cost start-up time.
    public var description: String { "DashboardServer" }

    public let configuration: DashboardConfiguration
    private let app: DashboardApp
    private let responder: RouterResponder<DashboardContext>
    private let http: HTTPServerService<RouterResponder<DashboardContext>>
    private let connections: [PGConnection]
    private let background = Mutex<BackgroundServices?>(nil)

    /// Checks the configuration and connects to the database; throws when either fails. It
    /// listens once it runs (`run()`, or `start` for a server of its own).
    public init(configuration: DashboardConfiguration, conninfo: String, logger: Logger) async throws {
        try configuration.validate()
        self.configuration = configuration
        var connections: [PGConnection] = []
        for i in 0..<configuration.connections {
            connections.append(
                try await PGConnection.connect(
                    conninfo, label: "dashboard.\(i)", statementTimeout: configuration.statementTimeout.seconds, settings: .reports))
        }
        self.connections = connections
        app = DashboardApp(configuration: configuration, connections: connections, logger: logger)
        responder = app.router().buildResponder()
        http = try HTTPServerService(responder: responder, settings: configuration.serverSettings, logger: logger)
    }

    /// Connects and serves in a service group of its own (a program embedding the dashboard, the
    /// tests), once it listens; `stop()` ends it.
    public static func start(configuration: DashboardConfiguration, conninfo: String, logger: Logger) async throws -> DashboardServer {
        let server = try await DashboardServer(configuration: configuration, conninfo: conninfo, logger: logger)
        let services = BackgroundServices([server], logger: logger)
        server.background.withLock { $0 = services }
        do {
            _ = try await server.listening()
        } catch {
            services.stop()
            throw error
        }
        return server
    }

    /// Serves until a graceful shutdown; then closes the database connections.
    public func run() async throws {
        defer { Task { [connections] in for c in connections { await c.close() } } }
        try await http.run()
    }

    /// Waits until the server listens; its port.
    @discardableResult
    public func listening() async throws -> Int { try await http.listening.wait() }

    /// The port listened on (the one the system chose when asked for 0), or 0 when not listening.
    public var port: Int { http.listening.port ?? 0 }

    /// The address to open in a browser.
    public var url: String { "http://\(configuration.address):\(port)/" }

    /// Stops a server `start` started (gracefully; returns at once).
    public func stop() {
        background.withLock {
            let services = $0
            $0 = nil  // the group holds this server: let both go once it has ended
            return services
        }?.stop()
    }

    /// A response as the socket would carry it, minus the socket: status, header fields (names
    /// lower-cased) and body.
    public struct Reply: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: Data
    }

    /// Answers one request straight from the router and its middleware, without a socket (to
    /// time or check pages). `target` is the path and query; a `Host` header is added when none
    /// is given (the listening port, 0 before).
    public func respond(_ method: String, _ target: String, headers: [String: String] = [:], body: Data = Data()) async -> Reply {
        var fields = HTTPFields()
        for (name, value) in headers { if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) } }
        let host = headers.first { $0.key.lowercased() == "host" }?.value ?? "127.0.0.1:\(port)"
        fields[values: DashboardSecurity.hostField] = []
        let head = HTTPRequest(method: HTTPRequest.Method(method) ?? .get, scheme: "http", authority: host, path: target, headerFields: fields)
        let request = Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body)))
        let context = DashboardContext(logger: app.logger, port: port)
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            return Reply(status: 500, headers: [:], body: Data("\(error)".utf8))
        }
        var names: [String: String] = [:]
        for field in response.headers { names[field.name.canonicalName] = response.headers[field.name] }
        return Reply(status: response.status.code, headers: names, body: Data(await response.bytes))
    }
}
