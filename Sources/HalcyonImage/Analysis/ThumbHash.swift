import Foundation

/// ThumbHash (evanw.github.io/thumbhash): luminance, two chroma channels and alpha as a few
/// DCT terms each, with the aspect ratio, in about 25 bytes. Follows the published reference
/// encoder step by step (JavaScript's `Math.round`: halves round up).
enum ThumbHash {
    static func encode(_ image: Thumbnail) -> [UInt8] {
        let w = image.width, h = image.height, n = w * h
        precondition(w <= 100 && h <= 100)
        var avgR = 0.0, avgG = 0.0, avgB = 0.0, avgA = 0.0
        for i in 0..<n {
            let alpha = Double(image.rgba[i * 4 + 3]) / 255
            avgR += alpha / 255 * Double(image.rgba[i * 4])
            avgG += alpha / 255 * Double(image.rgba[i * 4 + 1])
            avgB += alpha / 255 * Double(image.rgba[i * 4 + 2])
            avgA += alpha
        }
        if avgA > 0 {
            avgR /= avgA
            avgG /= avgA
            avgB /= avgA
        }
        let hasAlpha = avgA < Double(n)
        let lLimit = hasAlpha ? 5.0 : 7.0
        let lx = max(1, round(lLimit * Double(w) / Double(max(w, h))))
        let ly = max(1, round(lLimit * Double(h) / Double(max(w, h))))
        var l = [Double](repeating: 0, count: n), p = l, q = l, a = l
        for i in 0..<n {
            let alpha = Double(image.rgba[i * 4 + 3]) / 255
            let r = avgR * (1 - alpha) + alpha / 255 * Double(image.rgba[i * 4])
            let g = avgG * (1 - alpha) + alpha / 255 * Double(image.rgba[i * 4 + 1])
            let b = avgB * (1 - alpha) + alpha / 255 * Double(image.rgba[i * 4 + 2])
            l[i] = (r + g + b) / 3
            p[i] = (r + g) / 2 - b
            q[i] = r - g
            a[i] = alpha
        }
        func channel(_ c: [Double], _ nx: Int, _ ny: Int) -> (dc: Double, ac: [Double], scale: Double) {
            var dc = 0.0, ac: [Double] = [], scale = 0.0
            var fx = [Double](repeating: 0, count: w)
            for cy in 0..<ny {
                var cx = 0
                while cx * ny < nx * (ny - cy) {
                    var f = 0.0
                    for x in 0..<w { fx[x] = cos(Double.pi / Double(w) * Double(cx) * (Double(x) + 0.5)) }
                    c.withUnsafeBufferPointer { c in
                        fx.withUnsafeBufferPointer { fx in
                            for y in 0..<h {
                                let fy = cos(Double.pi / Double(h) * Double(cy) * (Double(y) + 0.5))
                                for x in 0..<w { f += c[x + y * w] * fx[x] * fy }
                            }
                        }
                    }
                    f /= Double(n)
                    if cx > 0 || cy > 0 {
                        ac.append(f)
                        scale = max(scale, abs(f))
                    } else {
                        dc = f
                    }
                    cx += 1
                }
            }
            if scale > 0 { ac = ac.map { 0.5 + 0.5 / scale * $0 } }
            return (dc, ac, scale)
        }
        let L = channel(l, max(3, Int(lx)), max(3, Int(ly)))
        let P = channel(p, 3, 3), Q = channel(q, 3, 3)
        let A = hasAlpha ? channel(a, 5, 5) : (dc: 1.0, ac: [], scale: 1.0)
        let landscape = w > h
        let header24 =
            Int(round(63 * L.dc)) | Int(round(31.5 + 31.5 * P.dc)) << 6 | Int(round(31.5 + 31.5 * Q.dc)) << 12
            | Int(round(31 * L.scale)) << 18 | (hasAlpha ? 1 << 23 : 0)
        let header16 = Int(landscape ? ly : lx) | Int(round(63 * P.scale)) << 3 | Int(round(63 * Q.scale)) << 9 | (landscape ? 1 << 15 : 0)
        var hash: [UInt8] = [
            UInt8(header24 & 255), UInt8(header24 >> 8 & 255), UInt8(header24 >> 16 & 255), UInt8(header16 & 255), UInt8(header16 >> 8 & 255),
        ]
        if hasAlpha { hash.append(UInt8(Int(round(15 * A.dc)) | Int(round(15 * A.scale)) << 4)) }
        var odd = false
        for ac in hasAlpha ? [L.ac, P.ac, Q.ac, A.ac] : [L.ac, P.ac, Q.ac] {
            for f in ac {
                let u = UInt8(Int(round(15 * f)))
                if odd { hash[hash.count - 1] |= u << 4 } else { hash.append(u) }
                odd.toggle()
            }
        }
        return hash
    }

    /// JavaScript's `Math.round`: halves towards +∞.
    private static func round(_ v: Double) -> Double { (v + 0.5).rounded(.down) }
}
