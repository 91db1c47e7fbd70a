internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain

extension ImageFormat {
    /// Whether this build's ImageMagick writes it: found once, by encoding a 16×16 image
    /// (AVIF needs libheif built with an AV1 encoder, which some builds lack).
    var canEncode: Bool { Self.encodable.contains(self) }

    /// The output formats this build writes.
    static let encodable: Set<ImageFormat> = {
        _ = MagickImage.genesisToken
        return Set(
            FormatStep.Format.allCases.map(\.imageFormat).filter { format in
                let image = MagickImage(wand: NewMagickWand()!, format: format)
                let gray = NewPixelWand()
                defer { DestroyPixelWand(gray) }
                PixelSetColor(gray, "gray")
                guard MagickNewImage(image.wand, 16, 16, gray) == MagickTrue else { return false }
                return (try? image.encode()).map { ImageFormat.sniffOutput($0) == format } ?? false
            })
    }()
}
