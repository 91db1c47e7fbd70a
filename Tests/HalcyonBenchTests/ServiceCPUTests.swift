import Foundation
import HalcyonTestSupport
import Testing

@testable import HalcyonBench

/// The bench finds a shared service's process by its listening socket — on a machine with
/// hundreds of other sockets as well (a second test suite, many connections), which make
/// `/proc/net/unix` many pages long.
struct ServiceCPUTests {
    @Test func aUnixListenerAmongManySocketsIsFound() throws {
        let directory = try TestEnvironment.temporaryDirectory("service-cpu")
        let path = directory.appendingPathComponent(".s.PGSQL.5432").path
        let sockets = try HeldSockets(pairs: 200)
        defer { sockets.close() }
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 8) == 0)
        let found = try #require(ServiceCPU.listening(on: "unix:\(path)"))
        #expect(found.pid == getpid())
        #expect(ServiceCPU.listening(on: "unix:\(path).other") == nil)
    }
}
