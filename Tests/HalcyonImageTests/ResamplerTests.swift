internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonQualityReference
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// The resampler against ImageMagick's own Lanczos, and its window and alpha rules.
@Suite(.cpuHeavy) struct ResamplerTests {
    /// 16-bit RGB(A) samples of an image's first frame.
    static func samples(_ image: MagickImage, alpha: Bool = false) -> [UInt16] {
        let n = image.width * image.height * (alpha ? 4 : 3)
        var out = [UInt16](repeating: 0, count: n)
        out.withUnsafeMutableBytes {
            _ = MagickExportImagePixels(image.wand, 0, 0, image.width, image.height, alpha ? "RGBA" : "RGB", ShortPixel, $0.baseAddress)
        }
        return out
    }

    @Test(arguments: [(1920, 1080, 569, 320), (640, 360, 200, 113), (300, 200, 600, 400), (97, 61, 13, 7)])
    func matchesImageMagicksLanczos(w: Int, h: Int, tw: Int, th: Int) throws {
        let photo = try SampleImages.photo(width: w, height: h, seed: 11, format: .png)
        let reference = try MagickImage.decode(photo, format: .png)
        #expect(MagickResizeImage(reference.wand, tw, th, LanczosFilter, 1.0) == MagickTrue)
        let ours = try MagickImage.decode(photo, format: .png)
        try ours.resize(width: tw, height: th)
        #expect((ours.width, ours.height) == (tw, th))
        let db = QualityReference.psnr(Self.samples(ours), Self.samples(reference))
        // Same filter, different arithmetic (float against ImageMagick's doubles and edges).
        #expect(db > 40, "PSNR \(db) dB against ImageMagick's Lanczos for \(w)x\(h) → \(tw)x\(th)")
    }

    /// `resample8` of packed 8-bit RGB; nil when it fails.
    static func resampled8(
        _ source: [UInt8], _ w: Int, _ h: Int, to tw: Int, _ th: Int, window: Resampler.Window? = nil,
        arithmetic: Resampler.Arithmetic = .fixedPoint, simd: Bool = true
    ) -> [UInt8]? {
        let win = window ?? Resampler.Window(x: 0, y: 0, width: tw, height: th)
        var out = [UInt8](repeating: 0, count: win.width * win.height * 3)
        let ok = source.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer {
                Resampler.resample8(
                    src.baseAddress!, stride: w * 3, width: w, height: h, channels: 3, targetWidth: tw, targetHeight: th, window: win,
                    into: $0.baseAddress!, targetStride: win.width * 3, arithmetic: arithmetic, simd: simd)
            }
        }
        return ok ? out : nil
    }

    /// The fixed-point path the direct lane resizes RGB with: its AVX2 loops give exactly the
    /// samples of its portable loops (on noise, whose overshoots clamp between the passes, and
    /// on a photo); on a photo it stays within a few levels of the float loops (PSNR above 50 dB
    /// against them); a flat colour stays exactly flat (the rounded weights sum to one).
    @Test(arguments: [
        (360, 203, 285, 160), (960, 540, 285, 160), (300, 200, 600, 400), (97, 61, 13, 7), (2000, 40, 17, 40), (33, 17, 5, 3),
    ])
    func theFixedPointLoopsAgreeAndStayNearTheFloatOnes(w: Int, h: Int, tw: Int, th: Int) throws {
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<(w * h * 3)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let image = try MagickImage.decode(try SampleImages.photo(width: w, height: h, seed: 21, format: .png), format: .png)
        var photo = [UInt8](repeating: 0, count: w * h * 3)
        photo.withUnsafeMutableBytes { _ = MagickExportImagePixels(image.wand, 0, 0, w, h, "RGB", CharPixel, $0.baseAddress) }
        let flat = [UInt8]((0..<(w * h)).flatMap { _ in [200, 117, 3] as [UInt8] })
        for window in [nil, Resampler.Window(x: tw / 4, y: th / 5, width: max(1, tw / 2), height: max(1, th / 2))] {
            let label = "\(w)x\(h) → \(tw)x\(th), window \(String(describing: window))"
            for source in [noise, photo] {
                let avx = try #require(Self.resampled8(source, w, h, to: tw, th, window: window))
                let portable = try #require(Self.resampled8(source, w, h, to: tw, th, window: window, simd: false))
                #expect(avx == portable, "\(zip(avx, portable).filter { $0 != $1 }.count) of \(avx.count) samples differ, \(label)")
            }
            let fixed = try #require(Self.resampled8(photo, w, h, to: tw, th, window: window))
            let float = try #require(Self.resampled8(photo, w, h, to: tw, th, window: window, arithmetic: .float))
            let worst = zip(fixed, float).map { abs(Int($0) - Int($1)) }.max() ?? 0
            let db = QualityReference.psnr(fixed.map { UInt16($0) * 257 }, float.map { UInt16($0) * 257 })
            print("fixed point against float, \(label): PSNR \(db) dB, largest difference \(worst)")
            #expect(db > 50, "PSNR \(db) dB against the float loops (largest difference \(worst)), \(label)")
            let flatOut = try #require(Self.resampled8(flat, w, h, to: tw, th, window: window))
            #expect(flatOut == [UInt8]((0..<(flatOut.count / 3)).flatMap { _ in [200, 117, 3] as [UInt8] }), "\(label)")
        }
    }

    /// A shrink whose outputs each read more source pixels than a 16-bit weight table can hold
    /// (40,000 columns into one) falls back to the float loops: the same samples as they give.
    @Test func aShrinkTooWideForFixedPointTakesTheFloatLoops() throws {
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<(40_000 * 2 * 3)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let fixed = try #require(Self.resampled8(noise, 40_000, 2, to: 1, 2))
        let float = try #require(Self.resampled8(noise, 40_000, 2, to: 1, 2, arithmetic: .float))
        #expect(fixed == float)
    }

    /// The direct lane's C loops (`resample8`) against the Swift ones they copy (`resample` on
    /// 8-bit samples): the same samples, for RGB and RGBA (with transparent pixels), shrinks,
    /// enlargements and windows.
    @Test(arguments: [
        (360, 203, 285, 160, 3), (252, 189, 213, 160, 3), (300, 200, 120, 80, 4), (97, 61, 150, 100, 4), (33, 17, 5, 3, 3),
    ])
    func theCLoopsGiveTheSwiftLoopsSamples(w: Int, h: Int, tw: Int, th: Int, channels: Int) {
        var generator = SystemRandomNumberGenerator()
        var source = (0..<(w * h * channels)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        if channels == 4 { for i in stride(from: 3, to: source.count, by: 4 * 7) { source[i] = 0 } }  // some transparent pixels
        for window in [nil, Resampler.Window(x: tw / 4, y: th / 5, width: max(1, tw / 2), height: max(1, th / 2))] {
            let win = window ?? Resampler.Window(x: 0, y: 0, width: tw, height: th)
            var swift = [UInt8](repeating: 0, count: win.width * win.height * channels)
            let stride = w * channels, rowBytes = win.width * channels
            let swiftOK = source.withUnsafeBufferPointer { src in
                swift.withUnsafeMutableBufferPointer { out in
                    Resampler.resample(
                        width: w, height: h, channels: channels, targetWidth: tw, targetHeight: th, window: win,
                        read: { (first: Int, count: Int, columns: Range<Int>, into: UnsafeMutablePointer<UInt8>) -> Bool in
                            for r in 0..<count {
                                (into + r * columns.count * channels).update(
                                    from: src.baseAddress! + (first + r) * stride + columns.lowerBound * channels, count: columns.count * channels)
                            }
                            return true
                        },
                        write: { (first: Int, count: Int, rows: UnsafePointer<UInt8>) -> Bool in
                            (out.baseAddress! + first * rowBytes).update(from: rows, count: count * rowBytes)
                            return true
                        })
                }
            }
            var c = [UInt8](repeating: 0, count: win.width * win.height * channels)
            let cOK = source.withUnsafeBufferPointer { src in
                c.withUnsafeMutableBufferPointer { out in
                    Resampler.resample8(
                        src.baseAddress!, stride: stride, width: w, height: h, channels: channels, targetWidth: tw, targetHeight: th,
                        window: win, into: out.baseAddress!, targetStride: rowBytes, arithmetic: .float)
                }
            }
            #expect(swiftOK && cOK)
            let differing = zip(swift, c).filter { $0 != $1 }.count
            #expect(differing == 0, "\(differing) of \(c.count) samples differ for \(w)x\(h) → \(tw)x\(th) (\(channels) channels), window \(win)")
        }
    }

    @Test func aWindowIsExactlyThatPartOfTheWholeResult() throws {
        let photo = try SampleImages.photo(width: 400, height: 300, seed: 12, format: .png)
        let whole = try MagickImage.decode(photo, format: .png)
        try whole.resize(width: 200, height: 150)
        let part = try MagickImage.decode(photo, format: .png)
        try part.resize(width: 200, height: 150, window: .init(x: 30, y: 20, width: 100, height: 90))
        #expect((part.width, part.height) == (100, 90))
        try whole.crop(width: 100, height: 90, x: 30, y: 20)
        #expect(Self.samples(part) == Self.samples(whole))
    }

    @Test func transparentPixelsLendNoColour() throws {
        // Left half opaque red, right half fully transparent green: premultiplied filtering
        // keeps the soft edge red, only less opaque.
        var px = [UInt8]()
        for _ in 0..<40 { for x in 0..<80 { px += x < 40 ? [255, 0, 0, 255] : [0, 255, 0, 0] } }
        let png = try SampleImages.encode(pixels: px, width: 80, height: 40, alpha: true, format: .png, quality: 95)
        let image = try MagickImage.decode(png, format: .png)
        try image.resize(width: 20, height: 10)
        let edge = image.pixel(x: 10, y: 5)
        let soft: Bool = edge.alpha > 0.01 && edge.alpha < 0.5
        let red: Bool = edge.red > 0.95 && edge.green < 0.05
        #expect(soft, "edge pixel \(edge)")
        #expect(red, "edge pixel \(edge)")
        let far: Double = image.pixel(x: 19, y: 5).alpha
        #expect(far < 0.02)
    }

    @Test(arguments: [(1000, 300), (300, 1000), (720, 569), (5, 1)])
    func weightsAreNormalisedAndStayInTheSource(source: Int, target: Int) {
        let w = Resampler.Weights(source: source, target: target, window: 0..<target)
        for i in 0..<target {
            var sum: Float = 0
            for k in 0..<w.count[i] { sum += w.weights[i * w.stride + k] }
            let inside: Bool = w.start[i] >= 0 && w.start[i] + w.count[i] <= source && w.count[i] <= w.stride
            #expect(abs(sum - 1) < 1e-4)
            #expect(inside)
        }
    }

    @Test func aSolidColourStaysExactlyThatColour() throws {
        let png = try SampleImages.solid(width: 333, height: 111, red: 12, green: 200, blue: 99, format: .png)
        let image = try MagickImage.decode(png, format: .png)
        try image.resize(width: 50, height: 17)
        let s = Self.samples(image)
        let reds = Set(stride(from: 0, to: s.count, by: 3).map { s[$0] }), greens = Set(stride(from: 1, to: s.count, by: 3).map { s[$0] })
        #expect(reds == [UInt16(12 * 257)])
        #expect(greens == [UInt16(200 * 257)])
    }
}
