import Foundation

/// Just enough of ICC colour profiles to convert images to sRGB: writing a matrix/TRC RGB
/// display profile (the sRGB target handed to ImageMagick's lcms2, built here rather than
/// shipped as a file) and reading an embedded profile's description.
enum ICCProfile {
    /// An XYZ triple (PCS, D50).
    typealias XYZ = (x: Double, y: Double, z: Double)

    /// sRGB (IEC 61966-2-1), colorants adapted to D50 with Bradford, as in the usual sRGB
    /// profiles; its transfer curve, 1024 points.
    static let sRGB: Data = rgb(
        description: "sRGB IEC61966-2.1 (Halcyon)",
        red: (0.4360747, 0.2225045, 0.0139322),
        green: (0.3850649, 0.7168786, 0.0971045),
        blue: (0.1430804, 0.0606169, 0.7141733)
    ) { v in
        v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    /// A version 2.1 RGB display profile: three colorants, one transfer curve (encoded value →
    /// linear light) shared by the channels, D50 white.
    static func rgb(
        description: String, red: XYZ, green: XYZ, blue: XYZ,
        transfer: (Double) -> Double
    ) -> Data {
        let d50: XYZ = (0.9642, 1.0, 0.8249)
        var tags: [(signature: String, data: [UInt8])] = []
        tags.append(("desc", textDescription(description)))
        tags.append(("cprt", Array("text".utf8) + [0, 0, 0, 0] + Array("No copyright, use freely".utf8) + [0]))
        tags.append(("wtpt", xyzType(d50)))
        tags.append(("rXYZ", xyzType(red)))
        tags.append(("gXYZ", xyzType(green)))
        tags.append(("bXYZ", xyzType(blue)))
        var curve = Array("curv".utf8) + [0, 0, 0, 0] + be32(1024)
        for i in 0..<1024 {
            curve += be16(UInt16((min(max(transfer(Double(i) / 1023), 0), 1) * 65535).rounded()))
        }
        tags.append(("rTRC", curve))

        // Header (128 bytes), tag table, then the tags, each 4-byte aligned; gTRC and bTRC
        // point at rTRC's data.
        let tableSize = 4 + 12 * (tags.count + 2)
        var offset = 128 + tableSize
        var table = be32(UInt32(tags.count + 2))
        var body: [UInt8] = []
        var curveEntry: [UInt8] = []
        for tag in tags {
            let entry = be32(UInt32(offset)) + be32(UInt32(tag.data.count))
            table += Array(tag.signature.utf8) + entry
            if tag.signature == "rTRC" { curveEntry = entry }
            var data = tag.data
            while data.count % 4 != 0 { data.append(0) }
            body += data
            offset += data.count
        }
        table += Array("gTRC".utf8) + curveEntry + Array("bTRC".utf8) + curveEntry
        var header = be32(UInt32(128 + table.count + body.count))
        header += [0, 0, 0, 0]  // preferred CMM
        header += [0x02, 0x10, 0, 0]  // version 2.1
        header += Array("mntrRGB XYZ ".utf8)  // class, colour space, PCS
        header += [UInt8](repeating: 0, count: 12)  // date
        header += Array("acsp".utf8) + [UInt8](repeating: 0, count: 24)
        header += be32(0)  // perceptual intent
        header += s15(d50.x) + s15(d50.y) + s15(d50.z)  // PCS illuminant
        header += [UInt8](repeating: 0, count: 128 - header.count)
        return Data(header + table + body)
    }

    /// The profile's description (its `desc` tag, as text or multi-localised Unicode), up to its
    /// first NUL, or nil when it has none or is malformed. (An ASCII description's count often
    /// takes in padding NULs after the terminator: kept, they reached `source_meta` as `\u0000`,
    /// which jsonb refuses, and the job's success could not be recorded.)
    static func description(of profile: Data) -> String? {
        rawDescription(of: profile).map { String($0.prefix { $0 != "\u{0}" }) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    private static func rawDescription(of profile: Data) -> String? {
        let p = [UInt8](profile)
        func u32(_ i: Int) -> Int? { i >= 0 && i + 4 <= p.count ? Int(p[i]) << 24 | Int(p[i + 1]) << 16 | Int(p[i + 2]) << 8 | Int(p[i + 3]) : nil }
        guard let count = u32(128), count < 1000 else { return nil }
        for t in 0..<count {
            let e = 132 + 12 * t
            guard let sig = u32(e), let offset = u32(e + 4), let size = u32(e + 8) else { return nil }
            guard sig == 0x6465_7363, size >= 12, offset + size <= p.count else { continue }  // 'desc'
            let type = String(decoding: p[offset..<offset + 4], as: UTF8.self)
            if type == "desc", let n = u32(offset + 8), n > 0, offset + 12 + n <= p.count {
                return String(decoding: p[(offset + 12)..<(offset + 12 + n - 1)], as: UTF8.self)
            }
            if type == "mluc", let records = u32(offset + 8), records > 0,
                let length = u32(offset + 20), let start = u32(offset + 24),
                offset + start + length <= p.count
            {
                let bytes = p[(offset + start)..<(offset + start + length)]
                let units = stride(from: bytes.startIndex, to: bytes.endIndex - 1, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
                return String(decoding: units, as: UTF16.self)
            }
            return nil
        }
        return nil
    }

    private static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    private static func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    private static func s15(_ v: Double) -> [UInt8] { be32(UInt32(bitPattern: Int32((v * 65536).rounded()))) }
    private static func xyzType(_ v: XYZ) -> [UInt8] { Array("XYZ ".utf8) + [0, 0, 0, 0] + s15(v.x) + s15(v.y) + s15(v.z) }

    /// ICC v2 textDescriptionType: ASCII, then empty Unicode and ScriptCode parts.
    private static func textDescription(_ text: String) -> [UInt8] {
        let ascii = Array(text.utf8.map { $0 < 0x80 ? $0 : UInt8(ascii: "?") }) + [0]
        return Array("desc".utf8) + [0, 0, 0, 0] + be32(UInt32(ascii.count)) + ascii
            + [0, 0, 0, 0] + [0, 0, 0, 0] + [0, 0] + [0] + [UInt8](repeating: 0, count: 67)
    }
}
