import Dispatch

/// Runs blocking C calls (MagickWand, store I/O, file reads) on Dispatch threads so they never
/// occupy Swift's cooperative thread pool. (A libpq connection has a thread of its own:
/// `SerialThread`.)
public enum Blocking {
    private static let queue = DispatchQueue(label: "halcyon.blocking", attributes: .concurrent)

    /// Runs `body` on a Dispatch thread and resumes with its result.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
