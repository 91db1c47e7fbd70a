import Foundation
import HalcyonDomain
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// A Hummingbird application with Halcyon's HTTP settings, as a ServiceLifecycle `Service`: run
/// it in the command's `ServiceGroup`, and a graceful shutdown stops accepting, lets the
/// requests being answered finish and closes idle connections. `listening` says on which port
/// once it is bound (or why it could not be).
public struct HTTPServerService<Responder: HTTPResponder>: Service, CustomStringConvertible
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    /// Its name only, as ServiceLifecycle logs it (not the reflected application).
    public var description: String { "HTTPServerService" }
    private let application: Application<Responder>
    private let settings: HTTPServerSettings
    /// The port, once listening; the error, if binding failed.
    public let listening: ListeningPort

    /// Serves `responder` under `settings` (checked: a setting that cannot work throws).
    public init(responder: Responder, settings: HTTPServerSettings, logger: Logger) throws(HalcyonError) {
        try settings.validate()
        self.settings = settings
        let listening = ListeningPort()
        self.listening = listening
        application = Application(
            responder: responder, server: .guarded(settings),
            configuration: ApplicationConfiguration(address: .hostname(settings.address, port: settings.port), serverName: nil),
            onServerRunning: { channel in listening.bound(channel.localAddress?.port ?? 0) },
            logger: logger)
    }

    public func run() async throws {
        do {
            try await application.run()
            listening.failed(HalcyonError(.internal, "the HTTP server stopped"))
        } catch {
            let reported = listening.port == nil ? ListenError(error, settings) ?? error : error
            listening.failed(reported)
            throw reported
        }
    }
}

/// A port that could not be listened on, said in the terms of the option that chose it:
/// `--metrics-port 9464: address 127.0.0.1:9464 is in use` (not the socket call's own words).
public struct ListenError: Error, Sendable, CustomStringConvertible {
    public let description: String

    /// Nil when `error` is not a failure to bind the socket.
    init?(_ error: any Error, _ settings: HTTPServerSettings) {
        guard let io = error as? IOError, "\(io)".hasPrefix("bind(") else { return nil }
        let option = settings.portOption.map { "\($0) \(settings.port)" } ?? "port \(settings.port)"
        let address = "\(settings.address):\(settings.port)"
        description =
            io.errnoCode == EADDRINUSE
            ? "\(option): address \(address) is in use"
            : "\(option): cannot listen on \(address): \(String(cString: strerror(io.errnoCode)))"
    }
}

/// The port a server listens on, known once it is bound: `wait()` returns it (or throws why
/// the server could not listen).
public final class ListeningPort: Sendable {
    private enum State {
        case pending([CheckedContinuation<Int, any Error>])
        case bound(Int)
        case failed(any Error)
    }

    private let state = Mutex(State.pending([]))

    public init() {}

    /// The port, or nil while not (or no longer) listening.
    public var port: Int? {
        state.withLock {
            if case .bound(let port) = $0 { return port }
            return nil
        }
    }

    /// Waits until the server listens; its port.
    public func wait() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Int, any Error>? = state.withLock { state in
                switch state {
                case .pending(var waiting):
                    waiting.append(continuation)
                    state = .pending(waiting)
                    return nil
                case .bound(let port): return .success(port)
                case .failed(let error): return .failure(error)
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    func bound(_ port: Int) { settle(.bound(port), .success(port)) }

    func failed(_ error: any Error) { settle(.failed(error), .failure(error)) }

    private func settle(_ next: State, _ result: Result<Int, any Error>) {
        let waiting: [CheckedContinuation<Int, any Error>] = state.withLock { state in
            guard case .pending(let waiting) = state else {
                if case .bound = state, case .failed = next { state = next }
                return []
            }
            state = next
            return waiting
        }
        for continuation in waiting { continuation.resume(with: result) }
    }
}

/// Services run in a `ServiceGroup` of their own, outside any command's group: the demo's
/// origin, a dashboard embedded in a program or a test. `stop()` shuts them down gracefully.
public final class BackgroundServices: Sendable {
    private let group: ServiceGroup
    private let task: Task<Void, Never>

    public init(_ services: [any Service], logger: Logger) {
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        self.group = group
        task = Task {
            do { try await group.run() } catch { logger.error("background services ended", metadata: ["error": "\(error)"]) }
        }
    }

    /// Starts a graceful shutdown and returns at once.
    public func stop() {
        let group = self.group
        Task { await group.triggerGracefulShutdown() }
    }

    /// Shuts down gracefully and waits until every service has ended.
    public func stopAndWait() async {
        await group.triggerGracefulShutdown()
        await task.value
    }
}
