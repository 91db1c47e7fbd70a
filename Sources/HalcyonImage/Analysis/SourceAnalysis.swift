internal import CMagickWand
import Foundation
import HalcyonChain
import HalcyonDomain

extension SourceFacts {
    /// The facts of a source from its bytes, its header and what the decoder saw: the EXIF
    /// block is read from the file itself (JPEG, PNG, WebP) or, for other formats, from the
    /// profile ImageMagick kept (`exif`).
    package static func read(
        _ data: Data, format: ImageFormat, header: MagickImage.Header, hasAlpha: Bool, profile: String?, exif magickExif: Data? = nil
    ) -> SourceFacts {
        let size = header.decodedFrameSize
        var facts = SourceFacts(width: size.width, height: size.height, format: format, bytes: data.count)
        facts.hasAlpha = hasAlpha
        facts.frames = header.frames
        facts.profile = profile
        if let block = ExifLocator.block(in: data, format: format) ?? magickExif, let reader = ExifReader(block) {
            let fields = reader.read()
            facts.orientation = fields.orientation ?? 1
            facts.cameraMake = fields.make
            facts.cameraModel = fields.model
            facts.capturedAt = fields.capturedAt
            facts.hasGPS = fields.hasGPS
            facts.position = fields.position
        }
        return facts
    }
}

extension MagickImage {
    /// The current frame's raw EXIF profile, if ImageMagick kept one.
    var exifProfile: Data? {
        var length = 0
        guard let bytes = MagickGetImageProfile(wand, "exif", &length) else { return nil }
        defer { MagickRelinquishMemory(bytes) }
        return length > 0 ? Data(bytes: bytes, count: min(length, 1 << 20)) : nil
    }
}
