import Foundation

/// A TIFF-structured EXIF block built entry by entry, for tests that need known EXIF fields.
public struct SampleEXIF {
    public var bigEndian = true
    public var make: String? = "Halcyon Camera Co."
    public var model: String? = "HX-1"
    public var orientation: UInt16? = 1
    public var captured: String? = "2024:05:01 12:30:45"
    /// Degrees, minutes, seconds and N/S, E/W.
    public var gps: (lat: (Int, Int, Int), ns: String, lon: (Int, Int, Int), ew: String)? = ((48, 51, 24), "N", (2, 21, 3), "E")

    public init() {}

    public func block() -> [UInt8] {
        var out: [UInt8] = bigEndian ? [0x4D, 0x4D, 0, 42] : [0x49, 0x49, 42, 0]
        func u16(_ v: Int) -> [UInt8] { bigEndian ? [UInt8(v >> 8 & 255), UInt8(v & 255)] : [UInt8(v & 255), UInt8(v >> 8 & 255)] }
        func u32(_ v: Int) -> [UInt8] { bigEndian ? u16(v >> 16) + u16(v & 0xFFFF) : u16(v & 0xFFFF) + u16(v >> 16) }
        // Layout: header(8) | IFD0 | exif IFD | gps IFD | data area.
        typealias Entry = (tag: Int, type: Int, count: Int, value: [UInt8])
        var ifd0: [Entry] = [], exif: [Entry] = [], gpsIFD: [Entry] = []
        func ascii(_ s: String) -> [UInt8] { Array(s.utf8) + [0] }
        if let make { ifd0.append((0x010F, 2, make.utf8.count + 1, ascii(make))) }
        if let model { ifd0.append((0x0110, 2, model.utf8.count + 1, ascii(model))) }
        if let orientation { ifd0.append((0x0112, 3, 1, u16(Int(orientation)) + [0, 0])) }
        if let captured { exif.append((0x9003, 2, captured.utf8.count + 1, ascii(captured))) }
        if let gps {
            func rationals(_ d: (Int, Int, Int)) -> [UInt8] { u32(d.0) + u32(1) + u32(d.1) + u32(1) + u32(d.2) + u32(1) }
            gpsIFD = [
                (1, 2, 2, ascii(gps.ns) + [0, 0]), (2, 5, 3, rationals(gps.lat)), (3, 2, 2, ascii(gps.ew) + [0, 0]), (4, 5, 3, rationals(gps.lon)),
            ]
        }
        let ifdSize = { (n: Int) in n == 0 ? 0 : 2 + n * 12 + 4 }
        let extra = (exif.isEmpty ? 0 : 1) + (gpsIFD.isEmpty ? 0 : 1)
        let ifd0Offset = 8, exifOffset = ifd0Offset + ifdSize(ifd0.count + extra)
        let gpsOffset = exifOffset + ifdSize(exif.count)
        let dataOffset = gpsOffset + ifdSize(gpsIFD.count)
        var data: [UInt8] = []
        func write(_ entries: [Entry]) -> [UInt8] {
            var bytes = u16(entries.count)
            for e in entries.sorted(by: { $0.tag < $1.tag }) {
                bytes += u16(e.tag) + u16(e.type) + u32(e.count)
                if e.value.count <= 4 {
                    bytes += e.value + [UInt8](repeating: 0, count: 4 - e.value.count)
                } else {
                    bytes += u32(dataOffset + data.count)
                    data += e.value
                }
            }
            return bytes + u32(0)
        }
        var main = ifd0
        if !exif.isEmpty { main.append((0x8769, 4, 1, u32(exifOffset))) }
        if !gpsIFD.isEmpty { main.append((0x8825, 4, 1, u32(gpsOffset))) }
        out += u32(ifd0Offset)
        out += write(main)
        if !exif.isEmpty { out += write(exif) }
        if !gpsIFD.isEmpty { out += write(gpsIFD) }
        return out + data
    }

    /// `jpeg` with this block in an APP1 segment right after SOI.
    public func inserted(into jpeg: Data) -> Data {
        let payload = Array("Exif".utf8) + [0, 0] + block()
        let length = payload.count + 2
        return Data(jpeg.prefix(2)) + Data([0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 255)] + payload) + Data(jpeg.dropFirst(2))
    }
}
