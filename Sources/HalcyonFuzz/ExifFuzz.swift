import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime

/// Fuzz target `exif`: the EXIF reader — the block found in a JPEG (APP1), PNG (`eXIf`) or WebP
/// (`EXIF`) file by walking its segments or chunks (`ExifLocator`), else the input itself as the
/// TIFF-structured block ImageMagick hands over for other formats — and the `SourceFacts` and
/// `source_meta` JSON a job records from it (orientation, camera, capture time, GPS).
///
/// Properties checked: orientation 1–8; a GPS position within ±90° / ±180°; `source_meta`
/// written as JSON parses back to the same value.
public enum ExifFuzz {
    public static func run(_ data: Data) {
        let format = ImageFormat.sniff(data) ?? .tiff
        let header = MagickImage.Header(width: 640, height: 480, frames: 1, swapsAxes: false)
        let facts = SourceFacts.read(data, format: format, header: header, hasAlpha: false, profile: nil, exif: data)
        precondition((1...8).contains(facts.orientation), "orientation \(facts.orientation)")
        if let p = facts.position {
            precondition(abs(p.latitude) <= 90 && abs(p.longitude) <= 180, "position \(p)")
        }
        let meta = facts.meta
        let text = meta.jsonText
        precondition(JSONValue.parse(text) == meta, "source_meta \(text) does not read back")
        _ = SourceRecord(facts)
        _ = SourceRecord(facts.withoutPosition).metaJSON
    }
}
