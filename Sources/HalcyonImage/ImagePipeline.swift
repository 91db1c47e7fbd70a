import Foundation
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
}

/// The encoded result of a chain.
public struct ProcessedImage: Sendable {
    public var data: Data
    public var format: ImageFormat
    public var width: Int
    public var height: Int
}

/// Decode once → auto-orient → sRGB → each step → strip → encode, in one wand. Blocking:
/// call from a Dispatch thread.
public enum ImagePipeline {
    public static func run(_ data: Data, format: ImageFormat, chain: ProcessorChain,
                            limits: ImageLimits = ImageLimits()) throws(HalcyonError) -> ProcessedImage {
        let header = try MagickImage.ping(data, format: format)
        guard header.width <= limits.maxWidth, header.height <= limits.maxHeight,
              header.width * header.height <= limits.maxPixels else {
            throw HalcyonError(.imageTooLarge, "\(header.width)x\(header.height) exceeds the limits (\(limits.maxWidth)x\(limits.maxHeight), \(limits.maxPixels / 1_000_000) MP)")
        }
        guard header.frames <= limits.maxFrames, header.frames * header.width * header.height <= limits.maxPixels * 4 else {
            throw HalcyonError(.imageTooLarge, "\(header.frames) frames of \(header.width)x\(header.height) exceed the limits (\(limits.maxFrames) frames)")
        }
        let image = try MagickImage.decode(data, format: format, shrinkHint: chain.shrinkHint(for: header))
        try image.autoOrient()
        try image.toSRGB()
        if let output = chain.outputFormat { image.outputFormat = output }
        for processor in chain.processors {
            try processor.process(image)
        }
        let encoded = try image.encode()
        return ProcessedImage(data: encoded, format: image.outputFormat, width: image.width, height: image.height)
    }
}
