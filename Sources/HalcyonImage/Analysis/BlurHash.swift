import Foundation
import HalcyonDomain

/// BlurHash (blurha.sh): the image as a few cosine components, in linear light, written in
/// base 83. BlurHash has no alpha: transparent pixels count as white (the page behind most
/// placeholders).
enum BlurHash {
    static func encode(_ image: Thumbnail, x cx: Int, y cy: Int) -> String {
        precondition((1...9).contains(cx) && (1...9).contains(cy))
        let w = image.width, h = image.height
        let linear = (0...255).map { sRGBToLinear(Double($0) / 255) }
        // Linear RGB of each pixel over white.
        var pixels = [Double](repeating: 0, count: w * h * 3)
        for i in 0..<(w * h) {
            let a = Double(image.rgba[i * 4 + 3]) / 255
            for c in 0..<3 { pixels[i * 3 + c] = linear[Int(image.rgba[i * 4 + c])] * a + (1 - a) }
        }
        var factors: [(Double, Double, Double)] = []
        for j in 0..<cy {
            let fy = (0..<h).map { cos(Double.pi * Double(j) * Double($0) / Double(h)) }
            for i in 0..<cx {
                let fx = (0..<w).map { cos(Double.pi * Double(i) * Double($0) / Double(w)) }
                // The reference's order of operations, so that the same pixels give the same string.
                let norm = i == 0 && j == 0 ? 1.0 : 2.0
                var r = 0.0, g = 0.0, b = 0.0
                pixels.withUnsafeBufferPointer { px in
                    fx.withUnsafeBufferPointer { fx in
                        for y in 0..<h {
                            for x in 0..<w {
                                let basis = norm * fx[x] * fy[y], p = (y * w + x) * 3
                                r += basis * px[p]
                                g += basis * px[p + 1]
                                b += basis * px[p + 2]
                            }
                        }
                    }
                }
                let n = Double(w * h)
                factors.append((r / n, g / n, b / n))
            }
        }
        var hash = base83((cx - 1) + (cy - 1) * 9, 1)
        let ac = factors.dropFirst()
        let maximum: Double
        if ac.isEmpty {
            maximum = 1
            hash += base83(0, 1)
        } else {
            let actual = ac.map { max(abs($0.0), abs($0.1), abs($0.2)) }.max()!
            let quantised = Int(max(0, min(82, (actual * 166 - 0.5).rounded(.down))))
            maximum = Double(quantised + 1) / 166
            hash += base83(quantised, 1)
        }
        let dc = factors[0]
        hash += base83(linearToSRGB(dc.0) << 16 | linearToSRGB(dc.1) << 8 | linearToSRGB(dc.2), 4)
        for f in ac {
            func q(_ v: Double) -> Int { Int(max(0, min(18, (signPow(v / maximum, 0.5) * 9 + 9.5).rounded(.down)))) }
            hash += base83(q(f.0) * 19 * 19 + q(f.1) * 19 + q(f.2), 2)
        }
        return hash
    }

    static func sRGBToLinear(_ v: Double) -> Double { v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4) }

    static func linearToSRGB(_ value: Double) -> Int {
        let v = max(0, min(1, value))
        return v <= 0.0031308 ? Int(v * 12.92 * 255 + 0.5) : Int((1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5)
    }

    private static func signPow(_ v: Double, _ e: Double) -> Double { v < 0 ? -pow(-v, e) : pow(v, e) }

    private static func base83(_ value: Int, _ length: Int) -> String {
        var out = [UInt8](repeating: 0, count: length)
        var v = value
        for i in (0..<length).reversed() {
            out[i] = Placeholders.base83[v % 83]
            v /= 83
        }
        return String(decoding: out, as: UTF8.self)
    }
}
