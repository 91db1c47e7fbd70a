internal import CImageCodecs
import Foundation
import HalcyonChain
import Synchronization

/// Separable Lanczos-3 resampling of 8- or 16-bit RGB(A) pixels, the resize behind `resize` and
/// `downsample`: `resample` streams ImageMagick's 16-bit pixels; `resample8` resizes the direct
/// lane's 8-bit pixels (`DirectLane`) in C, from the same weights: opaque RGB in 16-bit fixed
/// point on AVX2, RGBA with the same float loops as `resample`, sample for sample.
///
/// ImageMagick 6's own `MagickResizeImage` costs 13–20 ms for the small reductions left after
/// shrink-on-load (720×405 → 569×320 on this machine kind), more than the JPEG decode itself;
/// this does the same filter in 1–3 ms. It also computes only an output *window*, so
/// `resize(mode=fill)` never filters the columns its centre-crop throws away. Pixels with alpha
/// are filtered premultiplied (as ImageMagick does), so transparent pixels don't bleed colour.
enum Resampler {
    /// The Lanczos lobes: the kernel is sinc(x)·sinc(x/3) on |x| < 3.
    static let lobes = 3.0

    /// Pixel-taps of scaling `input` to `output`: rows first (each output column reads the
    /// kernel's width of input columns on every input row), then columns.
    static func work(from input: ImageSize, to output: ImageSize) -> Double {
        func taps(_ source: Int, _ target: Int) -> Double { 2 * lobes * max(1, Double(source) / Double(max(1, target))) }
        let rows = Double(output.width) * Double(input.height) * taps(input.width, output.width)
        return rows + Double(output.pixels) * taps(input.height, output.height)
    }

    static func lanczos(_ x: Double) -> Double {
        let x = abs(x)
        guard x < lobes else { return 0 }
        guard x > 1e-9 else { return 1 }
        let px = Double.pi * x
        return lobes * sin(px) * sin(px / lobes) / (px * px)
    }

    /// Filter weights along one axis: for each output index of a window, the first source index
    /// and the normalised weights of the source pixels it reads.
    struct Weights: Equatable {
        var start: [Int]
        var count: [Int]
        /// `stride` weights per output index (the first `count[i]` are used).
        var weights: [Float]
        var stride: Int

        /// Scaling `source` pixels to `target` pixels, for output indices `window`.
        init(source: Int, target: Int, window: Range<Int>) {
            let scale = Double(target) / Double(source)
            // Shrinking widens the kernel by 1/scale, so every source pixel contributes.
            let blur = max(1, 1 / scale)
            let support = lobes * blur
            stride = Int((2 * support).rounded(.up)) + 2
            start = []
            count = []
            weights = []
            start.reserveCapacity(window.count)
            count.reserveCapacity(window.count)
            weights.reserveCapacity(window.count * stride)
            for i in window {
                let centre = (Double(i) + 0.5) / scale
                let first = max(0, Int((centre - support + 0.5).rounded(.down)))
                let end = min(source, Int((centre + support + 0.5).rounded(.down)))
                var w = [Double]()
                for j in first..<max(first + 1, end) {
                    w.append(Resampler.lanczos((Double(j) + 0.5 - centre) / blur))
                }
                let total = w.reduce(0, +)
                start.append(first)
                count.append(w.count)
                for k in 0..<stride {
                    weights.append(k < w.count ? Float(total != 0 ? w[k] / total : (k == 0 ? 1 : 0)) : 0)
                }
            }
        }

        /// The same as `init`, from a small cache of the latest tables: a batch of same-sized
        /// images (a camera's photos, one chain) computes them once, not two sines a tap per image.
        static func shared(source: Int, target: Int, window: Range<Int>) -> Weights {
            let key = CacheKey(source: source, target: target, window: window)
            if let hit = cache.withLock({ $0[key] }) { return hit }
            let made = Weights(source: source, target: target, window: window)
            guard made.weights.count <= cacheMaxWeights else { return made }
            cache.withLock { tables in
                if tables.count >= cacheCapacity { tables.removeAll(keepingCapacity: true) }
                tables[key] = made
            }
            return made
        }

        struct CacheKey: Hashable {
            var source: Int, target: Int, window: Range<Int>
        }

        /// Tables kept, at most, and the largest kept (64 KB of weights: a 1,024-pixel window
        /// of a shrink by up to two and a half): the cache holds 2 MB at most.
        static let cacheCapacity = 32
        static let cacheMaxWeights = 16_384
        private static let cache = Mutex<[CacheKey: Weights]>([:])

        /// The tables as raw pointers, for the inner loops.
        func withPointers<R>(_ body: (UnsafePointer<Int>, UnsafePointer<Int>, UnsafePointer<Float>, Int) -> R) -> R {
            start.withUnsafeBufferPointer { s in
                count.withUnsafeBufferPointer { c in
                    weights.withUnsafeBufferPointer { w in body(s.baseAddress!, c.baseAddress!, w.baseAddress!, stride) }
                }
            }
        }
    }

    /// A rectangle of the output image, in output pixels.
    struct Window: Equatable {
        var x: Int, y: Int, width: Int, height: Int
    }

    /// Reads `count` source rows from `first` on, columns `columns`, into a buffer of
    /// `count × columns.count × channels` samples; false on failure.
    typealias RowReader<Sample> = (_ first: Int, _ count: Int, _ columns: Range<Int>, _ into: UnsafeMutablePointer<Sample>) -> Bool
    /// Takes `count` finished output rows (of the window) from `first` on; false on failure.
    typealias RowWriter<Sample> = (_ first: Int, _ count: Int, _ from: UnsafePointer<Sample>) -> Bool

    /// Source rows read, and output rows written, at a time.
    static let band = 16

    /// Resamples a `width`×`height` image (`channels` = 3 or 4 interleaved samples, the 4th
    /// being alpha; `Sample.max` is full intensity) to `targetWidth`×`targetHeight` and delivers the rows of `window` (the
    /// whole image when nil) to `write`, in order.
    ///
    /// Streaming: source rows are read in bands, filtered horizontally into a ring that holds
    /// only the rows the vertical filter still needs, and output rows leave in bands — so the
    /// memory used is a few rows, never a copy of either image (a 100 MP source costs a few MB
    /// here, not 1.6 GB). Only the source columns and rows the window reads are read at all.
    @discardableResult
    static func resample<Sample: FixedWidthInteger & UnsignedInteger>(
        width: Int, height: Int, channels: Int, targetWidth: Int, targetHeight: Int,
        window: Window? = nil, read: RowReader<Sample>, write: RowWriter<Sample>
    ) -> Bool {
        precondition(channels == 3 || channels == 4)
        let win = window ?? Window(x: 0, y: 0, width: targetWidth, height: targetHeight)
        let horizontal = Weights.shared(source: width, target: targetWidth, window: win.x..<(win.x + win.width))
        let vertical = Weights.shared(source: height, target: targetHeight, window: win.y..<(win.y + win.height))
        let firstColumn = horizontal.start.min() ?? 0
        let endColumn = zip(horizontal.start, horizontal.count).map { $0 + $1 }.max() ?? 0
        let columns = firstColumn..<endColumn
        let ww = win.width, wh = win.height
        // The ring keeps the horizontally filtered rows the current output row reads; the
        // rows an output row reads only move forward, so its longest reach is enough.
        let ringRows = max(1, vertical.count.max() ?? 1)

        let ring = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: ringRows * ww)
        let row = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: max(1, columns.count))
        let accumulator = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: ww)
        let input = UnsafeMutablePointer<Sample>.allocate(capacity: band * max(1, columns.count) * channels)
        let output = UnsafeMutablePointer<Sample>.allocate(capacity: band * ww * channels)
        defer { ring.deallocate(); row.deallocate(); accumulator.deallocate(); input.deallocate(); output.deallocate() }

        var filtered = vertical.start.min() ?? 0  // the next source row to filter into the ring
        var bandFirst = 0, bandCount = 0  // the source rows now in `input`
        let rowSamples = columns.count * channels

        /// Filters source row `r` horizontally into its ring slot.
        func filter(_ r: Int) -> Bool {
            if r >= bandFirst + bandCount {
                bandFirst = r
                bandCount = min(band, height - r)
                guard read(bandFirst, bandCount, columns, input) else { return false }
            }
            Self.convertRow(input + (r - bandFirst) * rowSamples, columns: columns.count, channels: channels, into: row)
            let out = ring + (r % ringRows) * ww
            horizontal.withPointers { hStart, hCount, hWeights, hStride in
                for ox in 0..<ww {
                    let s = row + (hStart[ox] - firstColumn), w = hWeights + ox * hStride
                    // Four accumulators: one alone makes the sum wait on the adder's latency.
                    var a0 = SIMD4<Float>.zero, a1 = SIMD4<Float>.zero, a2 = SIMD4<Float>.zero, a3 = SIMD4<Float>.zero
                    let n = hCount[ox]
                    var k = 0
                    while k + 3 < n {
                        a0 += s[k] * w[k]
                        a1 += s[k + 1] * w[k + 1]
                        a2 += s[k + 2] * w[k + 2]
                        a3 += s[k + 3] * w[k + 3]
                        k += 4
                    }
                    while k < n { a0 += s[k] * w[k]; k += 1 }
                    out[ox] = (a0 + a1) + (a2 + a3)
                }
            }
            return true
        }

        return vertical.withPointers { vStart, vCount, vWeights, vStride -> Bool in
            var pending = 0  // output rows waiting in `output`
            for oy in 0..<wh {
                let first = vStart[oy], end = first + vCount[oy]
                while filtered < end {
                    guard filter(filtered) else { return false }
                    filtered += 1
                }
                accumulator.update(repeating: .zero, count: ww)
                let w = vWeights + oy * vStride
                for k in 0..<vCount[oy] {
                    let line = ring + ((first + k) % ringRows) * ww, wk = w[k]
                    for x in 0..<ww { accumulator[x] += line[x] * wk }
                }
                Self.storeRow(accumulator, count: ww, channels: channels, into: output + pending * ww * channels)
                pending += 1
                if pending == band || oy == wh - 1 {
                    guard write(oy + 1 - pending, pending, output) else { return false }
                    pending = 0
                }
            }
            return true
        }
    }

    /// How `resample8` computes opaque RGB.
    enum Arithmetic: Sendable {
        /// `resample`'s float loops, sample for sample (`hc_resample_u8`).
        case float
        /// 16-bit fixed-point weights and 8-bit rows between the passes, on AVX2
        /// (`hc_resample_rgb8_fixed`): within a few levels of `float` (above 50 dB PSNR against it on
        /// photographs), about 2.4 times faster.
        case fixedPoint
    }

    /// `resample` of 8-bit samples held in memory, `width`×`height` at `stride` bytes a row, into
    /// `target` (the window's rows, `targetStride` bytes apart): the direct lane's resize, from
    /// the same weights. Opaque RGB goes by `arithmetic`; RGBA always by the float loops (its
    /// colours are filtered premultiplied, which 8-bit rows would coarsen where alpha is low).
    /// `simd: false` runs the fixed-point path's portable loops instead of its AVX2 ones (the
    /// same samples; for the tests that check so).
    static func resample8(
        _ source: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int, channels: Int, targetWidth: Int, targetHeight: Int,
        window: Window, into target: UnsafeMutablePointer<UInt8>, targetStride: Int, arithmetic: Arithmetic = .fixedPoint,
        simd: Bool = true
    ) -> Bool {
        precondition(channels == 3 || channels == 4)
        let horizontal = Weights.shared(source: width, target: targetWidth, window: window.x..<(window.x + window.width))
        let vertical = Weights.shared(source: height, target: targetHeight, window: window.y..<(window.y + window.height))
        return horizontal.withPointers { hStart, hCount, hWeights, hStride in
            vertical.withPointers { vStart, vCount, vWeights, vStride in
                if channels == 3 && arithmetic == .fixedPoint,
                    hc_resample_rgb8_fixed(
                        source, stride, height, hStart, hCount, hWeights, hStride, window.width, vStart, vCount, vWeights, vStride,
                        window.height, target, targetStride, simd ? 1 : 0) == 0
                {
                    return true
                }
                // Else the float loops: tables no 16-bit weight can hold (an output reading more
                // than 32,767 source pixels), or no memory.
                return hc_resample_u8(
                    source, stride, height, Int32(channels), hStart, hCount, hWeights, hStride, window.width, vStart, vCount, vWeights, vStride,
                    window.height, target, targetStride) == 0
            }
        }
    }

    /// Samples → float pixels (premultiplied when there is alpha), `columns` of them.
    @inline(__always)
    private static func convertRow<Sample: FixedWidthInteger & UnsignedInteger>(
        _ p: UnsafePointer<Sample>, columns: Int, channels: Int,
        into row: UnsafeMutablePointer<SIMD4<Float>>
    ) {
        let full = Float(Sample.max)
        // Through UInt32: Float(_:) of a generic integer is not the single instruction it is for
        // a concrete type.
        @inline(__always) func f(_ v: Sample) -> Float { Float(UInt32(truncatingIfNeeded: v)) }
        if channels == 4 {
            for x in 0..<columns {
                let q = p + x * 4
                let a = f(q[3]), k = a / full
                row[x] = SIMD4(f(q[0]) * k, f(q[1]) * k, f(q[2]) * k, a)
            }
        } else {
            for x in 0..<columns {
                let q = p + x * 3
                row[x] = SIMD4(f(q[0]), f(q[1]), f(q[2]), full)
            }
        }
    }

    /// Float pixels → samples, clamped and rounded, alpha un-premultiplied.
    @inline(__always)
    private static func storeRow<Sample: FixedWidthInteger & UnsignedInteger>(
        _ row: UnsafePointer<SIMD4<Float>>, count: Int, channels: Int,
        into q: UnsafeMutablePointer<Sample>
    ) {
        let full = Float(Sample.max)
        for x in 0..<count {
            let v = row[x]
            let o = q + x * channels
            if channels == 4 {
                let a: Sample = sample(v.w)
                let k: Float = a > 0 ? full / v.w : 0
                o[0] = sample(v.x * k); o[1] = sample(v.y * k); o[2] = sample(v.z * k); o[3] = a
            } else {
                o[0] = sample(v.x); o[1] = sample(v.y); o[2] = sample(v.z)
            }
        }
    }

    /// Clamps to 0…`Sample.max` and rounds to nearest (non-negative, so +0.5 and truncation).
    @inline(__always)
    private static func sample<Sample: FixedWidthInteger & UnsignedInteger>(_ v: Float) -> Sample {
        // Via Int32, for the same reason as in `convertRow`.
        v > 0 ? Sample(truncatingIfNeeded: Int32(min(v, Float(Sample.max)) + 0.5)) : 0
    }
}
