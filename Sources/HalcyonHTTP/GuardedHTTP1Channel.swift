import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Hummingbird's HTTP/1.1 child channel with Halcyon's guard in front: the same pipeline as
/// `HTTP1Channel` (NIO's decoder and encoder, the HTTP types codec, Hummingbird's connection
/// state handler with its idle timeout and graceful shutdown), plus `RequestGuardHandler`
/// before the decoder and `RequestPartObserver` after it. Requests are answered by
/// Hummingbird's own loop (keep-alive, one request after another).
public struct GuardedHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    public typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    public let responder: HTTPChannelHandler.Responder
    let settings: HTTPServerSettings
    let connections: ConnectionTable

    init(responder: @escaping HTTPChannelHandler.Responder, settings: HTTPServerSettings) {
        self.responder = responder
        self.settings = settings
        self.connections = ConnectionTable(limit: settings.maxConnections)
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = settings.maxHeadBytes
            limits.maxHeaderListSize = settings.maxHeadBytes
            limits.maxHeaderFieldCount = 1000
            let pipeline = channel.pipeline.syncOperations
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false,  // NIOAsyncChannel takes requests one after another
                withErrorHandling: false,  // RequestPartObserver answers the decoder's errors
                withOutboundHeaderValidation: false,  // HTTPTypes validates
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits
            )
            let guardHandler = RequestGuardHandler(settings: settings, connections: connections, logger: logger)
            try pipeline.addHandler(guardHandler, position: .first)
            try pipeline.addHandler(RequestPartObserver(guardHandler))
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: settings.idleTimeout, logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    public func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with Halcyon's limits (`HTTPServerSettings`): what every server of Halcyon's uses.
    public static func guarded(_ settings: HTTPServerSettings) -> HTTPServerBuilder {
        .init { responder in GuardedHTTP1Channel(responder: responder, settings: settings) }
    }
}
