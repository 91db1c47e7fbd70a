import Foundation
import Synchronization
import HalcyonCore

/// Limits checked from the header before any pixel is decoded.
public struct ImageLimits: Sendable {
    /// Widest and tallest accepted image. Default 16384.
    public var maxWidth = 16384
    public var maxHeight = 16384
    /// Most pixels (width × height). Default 100 megapixels.
    public var maxPixels = 100_000_000
    /// Most animation frames. Default 300.
    public var maxFrames = 300

    public init() {}

    /// `image.too_large` unless width × height is within the limits.
    func check(width: Int, height: Int) throws(HalcyonError) {
        guard width <= maxWidth, height <= maxHeight, width * height <= maxPixels else {
            throw HalcyonError(.imageTooLarge, "\(width)x\(height) exceeds the limits (\(maxWidth)x\(maxHeight), \(maxPixels / 1_000_000) MP)")
        }
    }
}

/// The encoded result of a chain.
public struct ProcessedImage: Sendable {
    public var data: Data
    public var format: ImageFormat
    public var width: Int
    public var height: Int
    /// Seconds spent decoding (header, pixels, orientation, sRGB; shared by the chains of one
    /// source), in this chain's steps (and its copy of the decoded image), and encoding.
    public var decodeSeconds: Double
    public var processSeconds: Double
    public var encodeSeconds: Double
}

/// Decode once → auto-orient → sRGB → each step → strip → encode, in one wand per chain.
/// Blocking: call from a Dispatch thread.
public enum ImagePipeline {
    /// Full decodes performed by this process (for metrics).
    public static var decodes: Int { decodeCount.load(ordering: .relaxed) }
    private static let decodeCount = Atomic<Int>(0)

    /// Counts the decodes made within a scope (`$observer.withValue(counter) { … }`), whatever
    /// else the process decodes meanwhile.
    public final class DecodeCounter: Sendable {
        private let n = Atomic<Int>(0)
        public init() {}
        public var count: Int { n.load(ordering: .relaxed) }
        func add() { n.add(1, ordering: .relaxed) }
    }
    @TaskLocal public static var observer: DecodeCounter?

    public static func run(_ data: Data, format: ImageFormat, chain: ProcessorChain,
                           limits: ImageLimits = ImageLimits()) throws(HalcyonError) -> ProcessedImage {
        try run(data, format: format, chains: [chain], limits: limits)[0].get()
    }

    /// Runs several chains on one source, decoding it once: at the largest shrink-on-load size
    /// any chain needs (a full decode if one needs everything), oriented and converted to sRGB
    /// once, then each chain on its own clone. A decode failure fails every chain; a chain's
    /// own failure fails only it. Results are in the order of `chains`.
    public static func run(_ data: Data, format: ImageFormat, chains: [ProcessorChain],
                           limits: ImageLimits = ImageLimits()) throws(HalcyonError) -> [Result<ProcessedImage, HalcyonError>] {
        let decodeStarted = ContinuousClock.now
        if let declared = DeclaredSize.of(data, format: format) {
            try limits.check(width: declared.width, height: declared.height)
        }
        guard format != .jpeg || DeclaredSize.jpegIsWhole(data) else {
            throw HalcyonError(.decodeFailed, "truncated jpeg: the data ends before the image does")
        }
        let header = try MagickImage.ping(data, format: format)
        try limits.check(width: header.width, height: header.height)
        guard header.frames <= limits.maxFrames, header.frames * header.width * header.height <= limits.maxPixels * 4 else {
            throw HalcyonError(.imageTooLarge, "\(header.frames) frames of \(header.width)x\(header.height) exceed the limits (\(limits.maxFrames) frames)")
        }
        let hints = chains.map { $0.shrinkHint(for: header) }
        let hint: (width: Int, height: Int)? = hints.contains { $0 == nil } ? nil
            : (hints.map { $0!.width }.max()!, hints.map { $0!.height }.max()!)
        let base = try MagickImage.decode(data, format: format, shrinkHint: hint)
        decodeCount.add(1, ordering: .relaxed)
        observer?.add()
        try base.autoOrient()
        try base.toSRGB()
        let decodeSeconds = (ContinuousClock.now - decodeStarted).seconds
        return chains.enumerated().map { i, chain in
            Result { () throws(HalcyonError) -> ProcessedImage in
                let started = ContinuousClock.now
                let image = i == chains.count - 1 ? base : base.clone()  // the last chain may consume the original
                if let output = chain.outputFormat { image.outputFormat = output }
                for processor in chain.processors {
                    try processor.process(image)
                }
                let processed = ContinuousClock.now
                let encoded = try image.encode()
                return ProcessedImage(data: encoded, format: image.outputFormat, width: image.width, height: image.height,
                                      decodeSeconds: decodeSeconds, processSeconds: (processed - started).seconds,
                                      encodeSeconds: (ContinuousClock.now - processed).seconds)
            }
        }
    }
}
