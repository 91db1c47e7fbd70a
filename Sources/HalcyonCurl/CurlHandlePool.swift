internal import CCurl
import Foundation

/// Idle libcurl easy handles, shared by every transfer of one client (downloads, webhook POSTs,
/// S3 requests). A handle serves one transfer at a time; `curl_easy_reset` clears its options
/// but keeps its connection and DNS caches, so requests to the same host reuse connections.
/// Creating the first pool initialises libcurl for the process.
package final class CurlHandlePool: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [OpaquePointer] = []  // guarded by `lock`
    private let maxIdle: Int

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

    /// Keeps up to `maxIdle` idle handles; more are cleaned up when given back.
    package init(maxIdle: Int) {
        _ = Self.globalInit
        self.maxIdle = maxIdle
    }

    /// An idle handle (reset), or a new one; nil when libcurl cannot make one.
    package func take() -> OpaquePointer? {
        lock.lock()
        let h = idle.popLast()
        lock.unlock()
        if let h {
            curl_easy_reset(h)
            return h
        }
        return curl_easy_init()
    }

    /// Returns a handle taken with `take()` once its transfer is over.
    package func give(_ handle: OpaquePointer) {
        lock.lock()
        defer { lock.unlock() }
        if idle.count < maxIdle { idle.append(handle) } else { curl_easy_cleanup(handle) }
    }

    deinit { idle.forEach { curl_easy_cleanup($0) } }
}
