import HalcyonRuntime
import Logging
import NIOCore
import NIOHTTP1

/// The first handler of a connection's pipeline: it sees the bytes as they arrive, before the
/// HTTP/1 decoder. It keeps what no decoder setting gives — a deadline for the whole request
/// from its first byte (`408`), a bound on the request line and headers together (`431`), the
/// refusal of bodies over the limit or without a length (`413`, `411`) before they are read,
/// and the connection's place in its server's `ConnectionTable`. `RequestPartObserver`, right
/// after the decoder, tells it where requests begin and end.
///
/// A refusal is written as plain bytes and the connection is closed the gentle way: the output
/// first, then the whole connection once the client has closed its side (or after a second),
/// discarding what else it sends — so the client reads the refusal rather than a reset.
final class RequestGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Where the connection's current request is.
    private enum Phase {
        /// No byte of a request has arrived since the last one ended.
        case waiting
        /// Bytes of a request's head have arrived (`bytes` of them), from `since`.
        case head(since: NIODeadline, bytes: Int)
        /// The head is in; its body is arriving.
        case body(since: NIODeadline)
        /// Refused: the reply is out, everything else is discarded until the connection closes.
        case refused

        var since: NIODeadline? {
            switch self {
            case .head(let since, _), .body(let since): since
            case .waiting, .refused: nil
            }
        }
    }

    private var phase = Phase.waiting
    /// The bytes of the request head being read (up to the limit), for what a decoder error
    /// does not say.
    private var headBytes: [UInt8] = []
    /// Requests that have arrived whole and whose response has not ended.
    private var answering = 0
    private var admitted = false
    private var context: ChannelHandlerContext?
    private var timer: Scheduled<Void>?
    private let settings: HTTPServerSettings
    private let connections: ConnectionTable
    private let logger: Logger

    init(settings: HTTPServerSettings, connections: ConnectionTable, logger: Logger) {
        self.settings = settings
        self.connections = connections
        self.logger = logger
    }

    // MARK: The connection

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { admit(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        forget(context)
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        forget(context)
        context.fireChannelInactive()
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard !admitted else { return }
        admitted = true
        if !connections.admit(context.channel) {
            logger.notice("http: every connection is being answered; closing a new one", metadata: ["limit": "\(settings.maxConnections)"])
            context.close(promise: nil)
        }
    }

    private func forget(_ context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        connections.remove(context.channel)
        self.context = nil
    }

    // MARK: Bytes in

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let count = buffer.readableBytes
        switch phase {
        case .refused:
            return
        case .waiting:
            phase = .head(since: .now(), bytes: count)
            headBytes = Array(buffer.readableBytesView.prefix(settings.maxHeadBytes))
            arm(context)
        case .head(let since, let bytes):
            phase = .head(since: since, bytes: bytes + count)
            headBytes += buffer.readableBytesView.prefix(max(0, settings.maxHeadBytes - headBytes.count))
        case .body:
            break
        }
        // The decoder runs now and tells the observer of any head or end in these bytes.
        context.fireChannelRead(data)
        if case .head(_, let bytes) = phase, bytes > settings.maxHeadBytes {
            refuse(
                .requestHeaderFieldsTooLarge,
                "request header fields too large (the request line and headers are over \(settings.maxHeadBytes) bytes)\n")
        }
    }

    // MARK: What the observer reports

    /// A request's head is in. False when it is refused (its body is not wanted).
    func headArrived(_ head: HTTPRequestHead) -> Bool {
        if case .refused = phase { return false }
        if head.headers.contains(name: "transfer-encoding") {
            refuse(.lengthRequired, "a body needs Content-Length\n")
            return false
        }
        if let length = head.headers.first(name: "content-length").flatMap({ Int($0) }), length > settings.maxBodyBytes {
            refuse(.payloadTooLarge, "request body over \(settings.maxBodyBytes) bytes\n")
            return false
        }
        phase = .body(since: phase.since ?? .now())
        headBytes = []
        if let context { arm(context) }
        return true
    }

    /// A request has arrived whole: it is answered now, and its time is no longer counted.
    func endArrived() {
        if case .refused = phase { return }
        phase = .waiting
        answering += 1
        if let context { connections.setWaiting(context.channel, false) }
    }

    /// A response has been written to its end.
    func responseEnded() {
        answering = max(0, answering - 1)
        if answering == 0, let context { connections.setWaiting(context.channel, true) }
    }

    /// The decoder could not read a request.
    func parserFailed(_ error: HTTPParserError) {
        switch error {
        case .headerOverflow:
            refuse(.requestHeaderFieldsTooLarge, "request header fields too large (over \(settings.maxHeadBytes) bytes)\n")
        case _ where Self.hasTransferEncoding(headBytes):
            // llhttp refuses Transfer-Encoding beside Content-Length (request smuggling) with
            // an error of its own; the answer to a Transfer-Encoding is the same either way.
            refuse(.lengthRequired, "a body needs Content-Length (and no Transfer-Encoding)\n")
        default:
            refuse(.badRequest, "bad request\n")
        }
    }

    /// Whether a request head's bytes hold a `Transfer-Encoding` field (any case).
    /// Compared byte by byte on each line: as Characters, `\r\n` is one grapheme and a search for
    /// `\ntransfer-encoding` would never match.
    static func hasTransferEncoding(_ head: [UInt8]) -> Bool {
        let name = Array("transfer-encoding".utf8)
        for line in head.split(separator: UInt8(ascii: "\n")).dropFirst() where line.count > name.count {
            let field = line.prefix(name.count).map { $0 | 0x20 }  // ASCII lower case (the name's '-' is unchanged)
            let next = line[line.startIndex + name.count]
            if field == name, next == UInt8(ascii: ":") || next == UInt8(ascii: " ") { return true }
        }
        return false
    }

    var isRefused: Bool {
        if case .refused = phase { return true }
        return false
    }

    // MARK: Deadline and refusals

    /// Makes sure a check runs when the current request's time is up.
    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil, let since = phase.since else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: since + .nanoseconds(settings.requestTimeout.nanoseconds)) {
            self.timer = nil
            self.deadlinePassed()
        }
    }

    private func deadlinePassed() {
        guard let since = phase.since, let context else { return }
        if NIODeadline.now() >= since + .nanoseconds(settings.requestTimeout.nanoseconds) {
            logger.debug("http: a request did not arrive in time", metadata: ["timeout": "\(settings.requestTimeout)"])
            refuse(.requestTimeout, "request timeout: the request did not arrive within \(settings.requestTimeout)\n")
        } else {
            arm(context)  // a later request of the same connection
        }
    }

    /// Answers `status` with `message` and closes the connection. A response already on its way
    /// (a request sent before this one) is not interleaved with: the connection is closed.
    private func refuse(_ status: HTTPResponseStatus, _ message: String) {
        guard let context, !isRefused else { return }
        phase = .refused
        timer?.cancel()
        timer = nil
        guard answering == 0 else {
            context.close(promise: nil)
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 160 + message.utf8.count)
        buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\nContent-Type: text/plain; charset=utf-8\r\n")
        buffer.writeString("Content-Length: \(message.utf8.count)\r\nConnection: close\r\n\r\n\(message)")
        let loop = context.eventLoop.assumeIsolated()
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { _ in
            context.close(mode: .output, promise: nil)
            // The client closes its side once it has read the reply; if it does not, after a second.
            loop.scheduleTask(in: .seconds(1)) { context.close(promise: nil) }
        }
    }
}

/// Right after the HTTP/1 decoder: tells the `RequestGuardHandler` where requests begin and
/// end, drops a refused request's parts, and turns the decoder's errors into the guard's
/// refusals (Hummingbird would answer each with a bare 400).
final class RequestPartObserver: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let guardHandler: RequestGuardHandler

    init(_ guardHandler: RequestGuardHandler) {
        self.guardHandler = guardHandler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard guardHandler.headArrived(head) else { return }
        case .body:
            if guardHandler.isRefused { return }
        case .end:
            if guardHandler.isRefused { return }
            guardHandler.endArrived()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { guardHandler.responseEnded() }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guardHandler.parserFailed(parserError)
    }
}
