import Dispatch

/// Runs blocking C calls (libpq, libcurl, MagickWand) on Dispatch threads so they never
/// occupy Swift's cooperative thread pool.
public enum Blocking {
    private static let queue = DispatchQueue(label: "halcyon.blocking", attributes: .concurrent)

    /// Runs `body` on a Dispatch thread and resumes with its result.
    public static func run<T: Sendable>(on queue: DispatchQueue? = nil,
                                        _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            (queue ?? Self.queue).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
