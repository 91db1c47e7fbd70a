import Foundation
import HalcyonDomain

/// Reads the few EXIF fields `SourceFacts` records — orientation, camera make and model,
/// capture time, GPS — from a TIFF-structured EXIF block. Every offset and count is checked
/// against the block before it is read; a block that lies ends the reading, never the job.
struct ExifReader {
    private let bytes: [UInt8]
    private let bigEndian: Bool

    /// Most entries read from one IFD (real ones hold a few dozen).
    static let maxEntries = 512
    /// Longest text value kept.
    static let maxText = 128

    /// `block` starts with the TIFF header, optionally after JPEG's `Exif\0\0` prefix.
    init?(_ block: some Collection<UInt8>) {
        var b = Array(block.prefix(1 << 20))
        if b.starts(with: Array("Exif\0\0".utf8)) { b.removeFirst(6) }
        guard b.count >= 8 else { return nil }
        switch (b[0], b[1]) {
        case (0x49, 0x49): bigEndian = false
        case (0x4D, 0x4D): bigEndian = true
        default: return nil
        }
        bytes = b
        guard u16(2) == 42 else { return nil }
    }

    struct Fields: Equatable {
        var orientation: Int?
        var make: String?
        var model: String?
        var capturedAt: String?
        var hasGPS = false
        var position: SourceFacts.GPSPosition?
    }

    func read() -> Fields {
        var fields = Fields()
        guard let ifd0 = u32(4) else { return fields }
        let main = entries(at: ifd0)
        if let o = main[0x0112].flatMap(number), (1...8).contains(o) { fields.orientation = o }
        fields.make = main[0x010F].flatMap(text)
        fields.model = main[0x0110].flatMap(text)
        var captured = main[0x0132].flatMap(text)
        if let exif = main[0x8769].flatMap(number), exif != ifd0 {
            captured = entries(at: exif)[0x9003].flatMap(text) ?? captured
        }
        fields.capturedAt = captured.flatMap(Self.isoDate)
        if let gpsOffset = main[0x8825].flatMap(number), gpsOffset != ifd0 {
            let gps = entries(at: gpsOffset)
            fields.hasGPS = !gps.isEmpty
            if let lat = gps[2].flatMap(degrees), let lon = gps[4].flatMap(degrees) {
                let south = gps[1].flatMap(text)?.uppercased() == "S", west = gps[3].flatMap(text)?.uppercased() == "W"
                if abs(lat) <= 90, abs(lon) <= 180 {
                    fields.position = SourceFacts.GPSPosition(latitude: south ? -lat : lat, longitude: west ? -lon : lon)
                }
            }
        }
        return fields
    }

    /// An IFD entry: type, count and where its value lies.
    struct Entry {
        var type: Int
        var count: Int
        /// Offset of the value (inline in the entry when it fits in 4 bytes).
        var offset: Int
    }

    private static let typeSizes = [1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8]

    private func entries(at offset: Int) -> [Int: Entry] {
        guard let n = u16(offset), n <= Self.maxEntries else { return [:] }
        var result: [Int: Entry] = [:]
        for i in 0..<n {
            let e = offset + 2 + i * 12
            guard let tag = u16(e), let type = u16(e + 2), let count = u32(e + 4), let size = Self.typeSizes[type] else { continue }
            let total = size * count
            guard count <= 1 << 16 else { continue }
            let at = total <= 4 ? e + 8 : (u32(e + 8) ?? -1)
            guard at >= 0, at + total <= bytes.count else { continue }
            result[tag] = Entry(type: type, count: count, offset: at)
        }
        return result
    }

    private func number(_ e: Entry) -> Int? {
        switch e.type {
        case 3: u16(e.offset)
        case 4: u32(e.offset)
        default: nil
        }
    }

    /// An ASCII value, trimmed; nil when empty or not printable text.
    private func text(_ e: Entry) -> String? {
        guard e.type == 2 || e.type == 7 else { return nil }
        var chars = Array(bytes[e.offset..<(e.offset + e.count)])
        if let nul = chars.firstIndex(of: 0) { chars.removeSubrange(nul...) }
        let s = String(decoding: chars.prefix(Self.maxText), as: UTF8.self).trimmingCharacters(in: .whitespaces)
        guard !s.isEmpty, s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F && $0 != "\u{FFFD}" }) else { return nil }
        return s
    }

    /// Three RATIONALs (degrees, minutes, seconds) as decimal degrees.
    private func degrees(_ e: Entry) -> Double? {
        guard e.type == 5, e.count == 3 else { return nil }
        var parts: [Double] = []
        for i in 0..<3 {
            guard let n = u32(e.offset + i * 8), let d = u32(e.offset + i * 8 + 4), d != 0 else { return nil }
            parts.append(Double(n) / Double(d))
        }
        return parts[0] + parts[1] / 60 + parts[2] / 3600
    }

    /// `2024:05:01 12:30:00` → `2024-05-01T12:30:00`; nil for anything else (cameras write
    /// blanks or zeros when unset).
    static func isoDate(_ s: String) -> String? {
        let c = Array(s.utf8)
        guard c.count >= 19, c[4] == 0x3A, c[7] == 0x3A, c[10] == 0x20, c[13] == 0x3A, c[16] == 0x3A,
            [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18].allSatisfy({ (0x30...0x39).contains(c[$0]) }),
            !s.hasPrefix("0000")
        else { return nil }
        let d = s.prefix(19)
        return d.prefix(10).replacingOccurrences(of: ":", with: "-") + "T" + d.suffix(8)
    }

    private func u16(_ i: Int) -> Int? {
        guard i >= 0, i + 2 <= bytes.count else { return nil }
        return bigEndian ? Int(bytes[i]) << 8 | Int(bytes[i + 1]) : Int(bytes[i + 1]) << 8 | Int(bytes[i])
    }

    private func u32(_ i: Int) -> Int? {
        guard i >= 0, i + 4 <= bytes.count else { return nil }
        let b = bytes[i..<(i + 4)].map(Int.init)
        return bigEndian ? b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3] : b[3] << 24 | b[2] << 16 | b[1] << 8 | b[0]
    }
}

/// Finds the EXIF block in a JPEG (APP1 `Exif`), PNG (`eXIf`) or WebP (`EXIF`) file without
/// decoding it: a walk over the segments or chunks, each checked against the data's end.
enum ExifLocator {
    static func block(in data: Data, format: ImageFormat) -> Data? {
        switch format {
        case .jpeg: jpeg(data)
        case .png: chunk(in: data, start: 8, named: "eXIf", stopAt: ["IDAT", "IEND"], bigEndian: true, headerSize: 8, trailer: 4)
        case .webp: chunk(in: data, start: 12, named: "EXIF", stopAt: [], bigEndian: false, headerSize: 8, trailer: 0)
        default: nil
        }
    }

    /// The markers before the first scan (where metadata lives), read in place.
    private static func jpeg(_ data: Data) -> Data? {
        data.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> Data? in
            var i = 2
            while i + 4 <= b.count, b[i] == 0xFF {
                let marker = b[i + 1]
                if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 || marker == 0xFF { i += marker == 0xFF ? 1 : 2; continue }
                if marker == 0xDA || marker == 0xD9 { return nil }  // start of scan / end: no EXIF before it
                let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
                guard length >= 2, i + 2 + length <= b.count else { return nil }
                if marker == 0xE1, length >= 8, b[(i + 4)..<(i + 10)].elementsEqual("Exif\0\0".utf8) {
                    return Data(b[(i + 4)..<(i + 2 + length)])
                }
                i += 2 + length
            }
            return nil
        }
    }

    /// PNG chunks are length (big-endian), type, data, CRC; RIFF chunks are type, length
    /// (little-endian), data, a pad byte to an even size.
    private static func chunk(
        in data: Data, start: Int, named name: String, stopAt: Set<String>, bigEndian: Bool, headerSize: Int, trailer: Int
    ) -> Data? {
        data.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> Data? in
            var i = start
            while i + headerSize <= b.count {
                let (lengthAt, typeAt) = bigEndian ? (i, i + 4) : (i + 4, i)
                let n = (0..<4).map { Int(b[lengthAt + $0]) }
                let length = bigEndian ? n[0] << 24 | n[1] << 16 | n[2] << 8 | n[3] : n[3] << 24 | n[2] << 16 | n[1] << 8 | n[0]
                let type = String(decoding: b[typeAt..<(typeAt + 4)], as: UTF8.self)
                guard length <= b.count - i - headerSize else { return nil }
                if type == name { return Data(b[(i + headerSize)..<(i + headerSize + length)]) }
                if stopAt.contains(type) { return nil }
                i += headerSize + length + trailer + (bigEndian ? 0 : length & 1)
            }
            return nil
        }
    }
}
