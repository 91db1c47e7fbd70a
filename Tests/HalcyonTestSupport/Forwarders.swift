import Foundation
import HalcyonHosts

extension TCPForwarder {
    /// Forwarders for a test, their script, port file and log in a directory of the test run's.
    public static func start(listen addresses: [String], targets: [String: String]) async throws -> TCPForwarder {
        try await start(listen: addresses, targets: targets, directory: try TestEnvironment.temporaryDirectory("forwarder"))
    }
}
