import HalcyonHTTP
import Hummingbird
import Logging
import NIOCore

/// What the dashboard's middleware learns about a request and hands on to its route: the port
/// it came in on (the `Host` check compares it), who is asking, and its form fields once read.
struct DashboardContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The local port of the request's connection.
    var port: Int
    /// The request's connection (nil when answered without a socket): a result stream whose
    /// client stops reading closes it.
    var channel: (any Channel)?
    /// Set by `DashboardAccess`: who is asking (`signIn` only on the way to `/login`).
    var access: DashboardSecurity.Access?
    /// A form post's fields, once `DashboardChanges` has read the body.
    var form: [(name: String, value: String)]?
    /// A body beyond this is refused (413). Set from the configuration by `DashboardResponses`;
    /// the connection's guard has refused larger declared bodies before they were read.
    var uploadLimit = HTTPServerSettings().maxBodyBytes

    var maxUploadSize: Int { uploadLimit }

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        port = source.channel.localAddress?.port ?? 0
        channel = source.channel
    }

    /// A context for a request answered without a socket (`DashboardServer.respond`).
    init(logger: Logger, port: Int) {
        coreContext = .init(source: Direct(logger: logger))
        self.port = port
    }

    private struct Direct: RequestContextSource {
        let logger: Logger
    }

    /// The role allowed, or nil before the access check (or on the way to sign in).
    var role: DashboardSecurity.Role? {
        if case .allowed(let role, _) = access { return role }
        return nil
    }
}
