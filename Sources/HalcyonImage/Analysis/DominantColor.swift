import HalcyonChain

/// The dominant colour: the most common colour at 4 bits a channel among the pixels that are
/// mostly opaque, then the exact mean of the pixels in that bin — the colour a page would
/// paint before the image arrives. `#ffffff` for an image with no opaque pixel.
enum DominantColor {
    static func of(_ image: Thumbnail) -> String {
        var counts = [Int](repeating: 0, count: 4096)
        let n = image.width * image.height
        func bin(_ i: Int) -> Int {
            Int(image.rgba[i * 4] >> 4) << 8 | Int(image.rgba[i * 4 + 1] >> 4) << 4 | Int(image.rgba[i * 4 + 2] >> 4)
        }
        for i in 0..<n where image.rgba[i * 4 + 3] >= 128 { counts[bin(i)] += 1 }
        guard let best = counts.indices.max(by: { counts[$0] < counts[$1] }), counts[best] > 0 else { return "#ffffff" }
        var sum = [0, 0, 0]
        for i in 0..<n where image.rgba[i * 4 + 3] >= 128 && bin(i) == best {
            for c in 0..<3 { sum[c] += Int(image.rgba[i * 4 + c]) }
        }
        let mean = sum.map { ($0 + counts[best] / 2) / counts[best] }
        return "#" + mean.map { String($0, radix: 16).leftPadded(2) }.joined()
    }
}
