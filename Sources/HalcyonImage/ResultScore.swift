import Foundation
import HalcyonDomain

/// A result's perceptual score (`ProcessedImage.score`): SSIMULACRA2, 0–100, of the bytes a chain
/// stores against the pixels it encoded them from — here, where each lane hands over a result
/// whose chain asks for one (`ImagePipeline.run`'s `scores`, the job option `score`). No metric
/// is built in: every score is nil.
enum ResultScore {
    /// The score of `encoded` against `reference`, the ImageMagick lane's output image.
    static func of(_ encoded: Data, format: ImageFormat, reference: MagickImage) throws(HalcyonError) -> Double? { nil }

    /// The score of `encoded` against `reference`, the direct lane's output pixels.
    static func of(_ encoded: Data, format: ImageFormat, reference: PixelBuffer) throws(HalcyonError) -> Double? { nil }
}
