import Foundation

/// A JPEG's bytes without its metadata, for recompressing it losslessly (`format(jxl,
/// lossless=true)`): the tables and scans byte for byte, and the markers that say how to show
/// the colours, and nothing a user did not ask to publish.
package enum JPEGMetadata {
    /// `jpeg` without EXIF (its orientation kept in a minimal EXIF of its own, so the image is
    /// still shown upright), XMP, IPTC and other application segments, comments, and whatever
    /// follows the end of the image; kept: JFIF (APP0), ICC profiles (APP2 `ICC_PROFILE`),
    /// Adobe's colour transform (APP14) and every segment of the image itself. Nil when the
    /// markers do not walk to an end of image (truncated or malformed: the caller keeps pixels).
    package static func stripped(_ jpeg: Data, orientation: Int) -> Data? {
        let b = [UInt8](jpeg)
        guard b.count >= 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var out: [UInt8] = [0xFF, 0xD8]
        out.reserveCapacity(b.count)
        var exif = (2...8).contains(orientation) ? minimalEXIF(orientation: orientation) : nil
        var i = 2
        while i + 1 < b.count {
            guard b[i] == 0xFF else { return nil }
            if b[i + 1] == 0xFF {  // fill byte before a marker
                i += 1
                continue
            }
            let marker = b[i + 1]
            if marker == 0xD9 {
                if let pending = exif { out += pending }
                return Data(out + [0xFF, 0xD9])
            }
            if (0xD0...0xD7).contains(marker) || marker == 0x01 {  // no length
                out += [0xFF, marker]
                i += 2
                continue
            }
            guard i + 3 < b.count else { return nil }
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 2, i + 2 + length <= b.count else { return nil }
            let segment = b[i..<(i + 2 + length)]
            if marker != 0xE0, let pending = exif {
                // After JFIF's APP0, which must come first when present.
                out += pending
                exif = nil
            }
            if keeps(marker, segment.dropFirst(4)) { out += segment }
            i += 2 + length
            if marker == 0xDA {
                // The scan's entropy-coded bytes, up to the next marker (0xFF 0x00 is a stuffed
                // byte, 0xFF 0xD0–0xD7 a restart inside the scan).
                var j = i
                while j + 1 < b.count, !(b[j] == 0xFF && b[j + 1] != 0x00 && !(0xD0...0xD7).contains(b[j + 1])) { j += 1 }
                out += b[i..<j]
                i = j
            }
        }
        return nil
    }

    private static func keeps(_ marker: UInt8, _ payload: ArraySlice<UInt8>) -> Bool {
        switch marker {
        case 0xE0, 0xEE: true  // JFIF, Adobe
        case 0xE2: payload.starts(with: Array("ICC_PROFILE\0".utf8))
        case 0xE1, 0xE3...0xED, 0xEF, 0xFE: false  // EXIF/XMP, other applications', comments
        default: true  // the image's own segments
        }
    }

    /// An APP1 EXIF segment holding the orientation tag alone (big-endian TIFF, one IFD entry).
    static func minimalEXIF(orientation: Int) -> [UInt8] {
        let tiff: [UInt8] =
            Array("MM".utf8) + [0x00, 0x2A, 0x00, 0x00, 0x00, 0x08]  // header, IFD0 at 8
            + [0x00, 0x01]  // one entry
            + [0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, UInt8(orientation), 0x00, 0x00]  // Orientation, SHORT, 1
            + [0x00, 0x00, 0x00, 0x00]  // no next IFD
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
    }
}
