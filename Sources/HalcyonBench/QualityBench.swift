import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime
import HalcyonSamples

/// `halcyon bench`'s Q: what `quality=auto` and `format(auto)` choose, in-process, on a corpus of
/// photographs resized to fit 800×800. Every fixed JPEG quality from 75 to 100 is encoded and
/// scored (SSIMULACRA2 against the chain's lossless pixels); the target T is the score fixed
/// q82 reaches on the median image; then, image by image and interleaved with a plain q82 job
/// (timed alike), `format(jpeg, quality=auto, min_score=T)`, `format(auto, min_score=T)` and,
/// when this build writes AVIF, `format(auto, min_score=T, formats=jpeg|webp)`; then
/// `format(jxl, quality=auto, min_score=T)`, and each JPEG source recompressed losslessly as
/// JPEG XL (`format(jxl, lossless=true)`: bytes against the JPEG's).
package enum QualityBench {
    package struct Source: Sendable {
        package var name: String
        package var data: Data
        package var format: ImageFormat
        package init(name: String, data: Data, format: ImageFormat) {
            self.name = name
            self.data = data
            self.format = format
        }
    }

    package static let resize = "resize(800x800, mode=fit)"
    /// The fixed qualities the table shows (the scan for the lowest quality that reaches T on
    /// every image covers `scan`).
    package static let fixedQualities = [75, 80, 82, 85, 88, 90, 95]
    package static let scan = Array(75...100)
    /// The done-means bounds the report holds each ratio to.
    package static let bounds = (
        bytesVsOracle: 1.05, bytesVsFixed: 0.8, referencePoints: 2.0, jpegCPUVsQ82: 2.0, autoCPUVsQ82: 8.0, autoVsJPEG: 0.7, jxlVsJPEG: 1.0
    )

    /// One image's output under one chain.
    package struct Output: Sendable {
        package var bytes: Int
        package var score: Double
        package var quality: Int?
        /// The quality was `quality` and a half.
        package var half = false
        package var format: ImageFormat
        package var encodes: Int
        package var wallSeconds: Double
        package var cpuSeconds: Double
        /// The Python port's score of the same bytes (nil: not run).
        package var reference: Double?
        package var data: Data
    }

    /// One automatic chain over the corpus, and the q82 jobs timed beside it.
    package struct Auto: Sendable {
        package var name: String
        package var chain: String
        package var outputs: [Output]
        package var q82: [Output]
        package var totalBytes: Int { outputs.reduce(0) { $0 + $1.bytes } }
        package var wallSeconds: Double { outputs.reduce(0) { $0 + $1.wallSeconds } }
        package var cpuSeconds: Double { outputs.reduce(0) { $0 + $1.cpuSeconds } }
        package var q82WallSeconds: Double { q82.reduce(0) { $0 + $1.wallSeconds } }
        package var q82CPUSeconds: Double { q82.reduce(0) { $0 + $1.cpuSeconds } }
        package var formats: [String: Int] { outputs.reduce(into: [:]) { $0[$1.format.rawValue, default: 0] += 1 } }
    }

    package struct Run: Sendable {
        package var names: [String]
        /// Per quality of `scan`, per image: bytes and score.
        package var fixed: [Int: [(bytes: Int, score: Double)]]
        package var target: Double
        /// The lowest fixed quality whose score reaches `target` on every image (nil: none up to 100).
        package var fixedFloor: Int?
        package var autos: [Auto]
        /// Why the reference check did not run (nil: it ran).
        package var referenceSkipped: String?
        /// The JPEG sources recompressed as JPEG XL: their bytes, and the JPEG XL files'.
        package var recompressed: (jpegBytes: Int, jxlBytes: Int, count: Int) = (0, 0, 0)
        /// Per image, the smallest JPEG reaching `target` (`oracle`); nil where none does.
        package var oracles: [Oracle?] = []
        package var oracleTotal: Int { oracles.reduce(0) { $0 + ($1?.bytes ?? 0) } }

        package func fixedTotal(_ q: Int) -> Int { fixed[q]?.reduce(0) { $0 + $1.bytes } ?? 0 }
        package func fixedLowest(_ q: Int) -> Double { fixed[q]?.map(\.score).min() ?? 0 }
    }

    /// Blocking: call from a Dispatch thread. `python` runs the reference check (nil: skipped,
    /// `skipNote` says why).
    package static func run(_ sources: [Source], python: String?, skipNote: String? = nil, log: (String) -> Void = { _ in }) throws -> Run {
        guard !sources.isEmpty else { throw HalcyonError(.invalidSource, "Q: no images") }
        let texts: [String] = scan.map { "\(resize) |> format(jpeg, quality=\($0))" } + ["\(resize) |> format(png)"]
        let scanChains = try texts.map { try ProcessorChain.parse($0) }
        var fixed: [Int: [(bytes: Int, score: Double)]] = [:]
        var lossless: [Data] = []
        for s in sources {
            let results = try ImagePipeline.run(
                s.data, format: s.format, chains: scanChains, scores: scanChains.map { _ in true })
            for (i, q) in scan.enumerated() {
                let out = try results[i].get()
                fixed[q, default: []].append((out.data.count, out.score ?? 0))
            }
            lossless.append(try results[scan.count].get().data)
        }
        let sorted82 = (fixed[82] ?? []).map(\.score).sorted()
        // The lower median: a score one of the images reaches at q82, rounded to a tenth.
        let target = (sorted82[(sorted82.count - 1) / 2] * 10).rounded() / 10
        let floor = scan.first { q in fixed[q]!.allSatisfy { $0.score >= target } }
        log(
            String(
                format: "Q: target %.1f (q82 on the median image); lowest fixed quality reaching it on every image: %@", target,
                floor.map { "q\($0)" } ?? "none"))

        let t = String(format: "%.1f", target)
        var autos = [
            ("jpeg auto", "\(resize) |> format(jpeg, quality=auto, min_score=\(t))"),
            ("auto", "\(resize) |> format(auto, min_score=\(t))"),
        ]
        // The default formats include AVIF; without AVIF the two cheaper ones are all there is.
        if encodesAVIF { autos.append(("auto jpeg|webp", "\(resize) |> format(auto, min_score=\(t), formats=jpeg|webp)")) }
        autos.append(("jxl auto", "\(resize) |> format(jxl, quality=auto, min_score=\(t))"))
        let q82Chain = try ProcessorChain.parse("\(resize) |> format(jpeg, quality=82)")
        var results = autos.map { Auto(name: $0.0, chain: $0.1, outputs: [], q82: []) }
        let parsed = try autos.map { try ProcessorChain.parse($0.1) }
        // Interleaved: per image, a q82 job before each automatic one, so both see the same load.
        for s in sources {
            for i in results.indices {
                results[i].q82.append(try timed(s, q82Chain))
                results[i].outputs.append(try timed(s, parsed[i]))
            }
        }
        var skipped = skipNote
        if let python {
            do {
                let outputs = results.flatMap { a in a.outputs.enumerated().map { (lossless[$0.offset], $0.element) } }
                let scores = try reference(python: python, pairs: outputs.map { ($0.0, $0.1.data, $0.1.format) })
                var k = 0
                for i in results.indices {
                    for j in results[i].outputs.indices {
                        results[i].outputs[j].reference = scores[k]
                        k += 1
                    }
                }
            } catch {
                skipped = "the Python reference failed: \(error)"
            }
        }
        var run = Run(names: sources.map(\.name), fixed: fixed, target: target, fixedFloor: floor, autos: results, referenceSkipped: skipped)
        run.oracles = try lossless.map { try oracle(lossless: $0, target: target) }
        let recompress = try ProcessorChain.parse("format(jxl, lossless=true)")
        for s in sources where s.format == .jpeg {
            let out = try ImagePipeline.run(s.data, format: .jpeg, chains: [recompress])[0].get()
            run.recompressed = (run.recompressed.jpegBytes + s.data.count, run.recompressed.jxlBytes + out.data.count, run.recompressed.count + 1)
        }
        return run
    }

    private static func timed(_ s: Source, _ chain: ProcessorChain) throws -> Output {
        let cpu0 = processCPUSeconds(), wall0 = ContinuousClock.now
        let out = try ImagePipeline.run(s.data, format: s.format, chains: [chain])[0].get()
        let wall = (ContinuousClock.now - wall0).seconds, cpu = processCPUSeconds() - cpu0
        return Output(
            bytes: out.data.count, score: out.score ?? 0, quality: out.quality, half: out.halfQuality, format: out.format, encodes: out.encodes,
            wallSeconds: wall, cpuSeconds: cpu, reference: nil, data: out.data)
    }

    /// The best JPEG an image could have at a target: the smallest of every whole and half
    /// quality from `oracleQualities`, at 4:4:4 and at 4:2:0, that scores at least it (our
    /// metric), encoded as the search encodes (libjpeg directly, from the chain's lossless pixels).
    package struct Oracle: Sendable {
        package var bytes: Int
        package var quality: Double
        package var chroma: ChromaSampling
    }
    package static let oracleQualities = 50...100

    /// `oracle` for one image (nil: no quality reaches `target`). Bytes grow with the quality,
    /// so per sampling the first quality that reaches is its smallest; a quality already larger
    /// than the best so far is not scored.
    package static func oracle(lossless png: Data, target: Double) throws -> Oracle? {
        guard let source = DirectLane.source(png, format: .png), let pixels = DirectLane.decode(png, source, hint: nil) else { return nil }
        let reference = try SSIMULACRA2Reference(pixels)
        var best: Oracle?
        for chroma in [ChromaSampling.full, .half] {
            guard let sampling = chroma.lumaFactors else { continue }
            for halves in (2 * oracleQualities.lowerBound)...(2 * oracleQualities.upperBound) {
                let data = try pixels.encodeJPEG(quality: halves / 2, half: halves % 2 == 1, progressive: false, sampling: sampling)
                if let best, data.count >= best.bytes { break }
                if try reference.score(encoded: data, format: .jpeg) >= target {
                    best = Oracle(bytes: data.count, quality: Double(halves) / 2, chroma: chroma)
                    break
                }
            }
        }
        return best
    }

    private static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Whether this build writes AVIF: a 16×16 image asked for as AVIF comes out as AVIF.
    package static let encodesAVIF: Bool = {
        guard let png = try? SampleImages.photo(width: 16, height: 16, seed: 1, format: .png),
            let out = try? ImagePipeline.run(png, format: .png, chain: ProcessorChain.parse("format(avif, quality=50)"))
        else { return false }
        return ImageFormat.sniff(out.data) == .avif
    }()

    // MARK: - The reference implementation

    /// A Python that imports the PyPI `ssimulacra2` package: `HALCYON_TEST_PYTHON`, scripts/test's
    /// venv, or `python3`; nil when none does.
    package static func referencePython() -> String? {
        let env = ProcessInfo.processInfo.environment
        let candidates = [env["HALCYON_TEST_PYTHON"], env["HOME"].map { "\($0)/.cache/halcyon/test-python/bin/python" }, "/usr/bin/python3"]
        for case let path? in candidates where FileManager.default.isExecutableFile(atPath: path) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = ["-c", "import ssimulacra2, PIL"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            guard (try? p.run()) != nil else { continue }
            p.waitUntilExit()
            if p.terminationStatus == 0 { return path }
        }
        return nil
    }

    static let oracle = """
        import json, sys
        from ssimulacra2 import compute_ssimulacra2
        # One process, in order: a pool's child forked beside numpy's threads can wait on a lock
        # for ever (and `python -c` cannot spawn its children instead).
        pairs = json.load(open(sys.argv[1]))
        print(json.dumps([compute_ssimulacra2(a, b) for a, b in pairs]))
        """

    /// The port's score of each output against its lossless PNG; outputs are turned into sRGB
    /// PNGs first (Pillow may not read WebP or AVIF), decoded as the worker's own score decodes
    /// them: AVIF by libheif, WebP by libwebp, the rest by ImageMagick.
    private static func reference(python: String, pairs: [(lossless: Data, output: Data, format: ImageFormat)]) throws -> [Double] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-bench-q-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var manifest: [[String]] = []
        for (i, p) in pairs.enumerated() {
            let ref = dir.appendingPathComponent("\(i)-ref.png"), dist = dir.appendingPathComponent("\(i)-out.png")
            try p.lossless.write(to: ref)
            let size = try MagickImage.decode(p.lossless, format: .png)
            if let decoded = try SSIMULACRA2Reference.decodeWithCodec(p.output, format: p.format, width: size.width, height: size.height) {
                try SampleImages.encode(
                    pixels: decoded.pixels, width: size.width, height: size.height, alpha: decoded.channels == 4, format: .png, quality: 100
                ).write(to: dist)
                manifest.append([ref.path, dist.path])
                continue
            }
            let image = try MagickImage.decode(p.output, format: p.format)
            // AVIF decodes as YCbCr: in sRGB, as the worker's own score reads it.
            try image.toSRGB()
            image.outputFormat = .png
            try image.encode().write(to: dist)
            manifest.append([ref.path, dist.path])
        }
        let script = dir.appendingPathComponent("oracle.py"), list = dir.appendingPathComponent("pairs.json")
        try Data(oracle.utf8).write(to: script)
        try JSONEncoder().encode(manifest).write(to: list)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = [script.path, list.path]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0, let scores = try? JSONDecoder().decode([Double].self, from: data), scores.count == pairs.count else {
            throw HalcyonError(.processingFailed, "ssimulacra2 (\(python)): \(String(decoding: errors.suffix(400), as: UTF8.self))")
        }
        return scores
    }
}

// MARK: - The report

extension QualityBench.Auto {
    package var lowestScore: Double { outputs.map(\.score).min() ?? 0 }
    package var highestScore: Double { outputs.map(\.score).max() ?? 0 }
    package var encodes: (min: Int, median: Int, max: Int) {
        let e = outputs.map(\.encodes).sorted()
        return e.isEmpty ? (0, 0, 0) : (e[0], e[e.count / 2], e[e.count - 1])
    }
    /// The largest |reference − target| and |ours − reference| (nil: no reference scores).
    package func referenceDistances(target: Double) -> (fromTarget: Double, oursFromReference: Double)? {
        let pairs = outputs.compactMap { o in o.reference.map { (o.score, $0) } }
        guard !pairs.isEmpty, pairs.count == outputs.count else { return nil }
        return (pairs.map { abs($0.1 - target) }.max()!, pairs.map { abs($0.0 - $0.1) }.max()!)
    }
}

extension QualityBench.Run {
    /// The done-means ratios: (JSON key, label, value, bound) — a ratio passes at or below its bound.
    package var ratios: [(key: String, label: String, value: Double, bound: Double)] {
        let b = QualityBench.bounds
        guard let jpeg = autos.first else { return [] }
        var out: [(key: String, label: String, value: Double, bound: Double)] = []
        if oracles.count == names.count, oracles.allSatisfy({ $0 != nil }) {
            out.append(
                (
                    "jpeg_auto_bytes_vs_oracle", "jpeg auto bytes / the per-image oracle's", Double(jpeg.totalBytes) / Double(max(oracleTotal, 1)),
                    b.bytesVsOracle
                ))
        }
        if let floor = fixedFloor {
            out.append(
                (
                    "jpeg_auto_bytes_vs_fixed_floor", "jpeg auto bytes / q\(floor)'s (lowest fixed reaching T everywhere)",
                    Double(jpeg.totalBytes) / Double(max(fixedTotal(floor), 1)), b.bytesVsFixed
                ))
        }
        if let d = jpeg.referenceDistances(target: target) {
            out.append(("jpeg_auto_max_reference_distance", "jpeg auto max |reference − T| (points)", d.fromTarget, b.referencePoints))
        }
        out.append(("jpeg_auto_cpu_vs_q82", "jpeg auto CPU / q82's", jpeg.cpuSeconds / max(jpeg.q82CPUSeconds, 1e-9), b.jpegCPUVsQ82))
        for a in autos.dropFirst() {
            let key = a.name.replacingOccurrences(of: "|", with: "_").replacingOccurrences(of: " ", with: "_")
            out.append(
                (
                    "\(key)_bytes_vs_jpeg_auto", "\(a.name) bytes / jpeg auto's", Double(a.totalBytes) / Double(max(jpeg.totalBytes, 1)),
                    a.name.hasPrefix("jxl") ? b.jxlVsJPEG : b.autoVsJPEG
                ))
            if !a.name.hasPrefix("jxl") {
                out.append(("\(key)_cpu_vs_q82", "\(a.name) CPU / q82's", a.cpuSeconds / max(a.q82CPUSeconds, 1e-9), b.autoCPUVsQ82))
            }
            if let d = a.referenceDistances(target: target) {
                out.append(("\(key)_max_reference_distance", "\(a.name) max |reference − T| (points)", d.fromTarget, b.referencePoints))
            }
        }
        return out
    }

    package var table: String {
        func kb(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / 1024) }
        var out =
            "Q — \(QualityBench.resize) on \(names.count) images, in-process, one at a time; scores: SSIMULACRA2 (ours) against the chain's lossless pixels\n"
        out += "  fixed JPEG   total KB   lowest score   median score\n"
        for q in QualityBench.fixedQualities {
            let scores = (fixed[q] ?? []).map(\.score).sorted()
            out += String(
                format: "  q%-10d %9@ %14.2f %14.2f\n", q, kb(fixedTotal(q)) as NSString, fixedLowest(q),
                scores.isEmpty ? 0 : scores[scores.count / 2])
        }
        out += String(format: "  T = %.1f (q82's score on the median image); ", target)
        out +=
            fixedFloor.map {
                "lowest fixed quality reaching T on every image: q\($0) (\(kb(fixedTotal($0))) KB, lowest \(String(format: "%.2f", fixedLowest($0))))\n"
            }
            ?? "no fixed quality up to 100 reaches T on every image\n"
        out += "  chain            total KB   lowest  highest   encodes min/med/max   CPU ms/job (q82)   wall ms/job (q82)   formats\n"
        let n = Double(max(names.count, 1))
        for a in autos {
            let e = a.encodes
            out +=
                "  " + a.name.padding(toLength: 14, withPad: " ", startingAt: 0)
                + String(
                    format: " %10@ %8.2f %8.2f %9d/%d/%d %15.1f (%5.1f) %13.1f (%5.1f)   %@\n", kb(a.totalBytes) as NSString, a.lowestScore,
                    a.highestScore,
                    e.min, e.median, e.max, a.cpuSeconds / n * 1000, a.q82CPUSeconds / n * 1000, a.wallSeconds / n * 1000,
                    a.q82WallSeconds / n * 1000,
                    a.formats.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") as NSString)
        }
        out += "  per image: q82 KB/score; each automatic chain's quality, format, KB/score (reference score)\n"
        for (i, name) in names.enumerated() {
            let q82 = fixed[82]![i]
            out +=
                "    " + name.padding(toLength: 22, withPad: " ", startingAt: 0)
                + String(format: " q82 %6@/%5.1f", kb(q82.bytes) as NSString, q82.score)
            for a in autos {
                let o = a.outputs[i]
                let q = "\(o.quality ?? 0)" + (o.half ? ".5" : "")
                out += String(format: " | %@ q%@ %6@/%5.1f", o.format.rawValue, q as NSString, kb(o.bytes) as NSString, o.score)
                if let r = o.reference { out += String(format: " (%5.1f)", r) }
            }
            if let oracle = oracles.indices.contains(i) ? oracles[i] : nil {
                out += String(format: " | oracle q%g %@ %6@", oracle.quality, oracle.chroma.rawValue, kb(oracle.bytes) as NSString)
            }
            out += "\n"
        }
        if let jpeg = autos.first, oracles.count == names.count, oracles.allSatisfy({ $0 != nil }) {
            out += String(
                format:
                    "  oracle (the smallest JPEG reaching T per image, qualities %d–%d in halves, 4:4:4 and 4:2:0): %@ KB; jpeg auto %.3f× it\n",
                QualityBench.oracleQualities.lowerBound, QualityBench.oracleQualities.upperBound, kb(oracleTotal) as NSString,
                Double(jpeg.totalBytes) / Double(max(oracleTotal, 1)))
        }
        for a in autos {
            if let d = a.referenceDistances(target: target) {
                out += String(
                    format: "  %@ by the reference (PyPI ssimulacra2): max |reference − T| %.2f, max |ours − reference| %.2f\n", a.name, d.fromTarget,
                    d.oursFromReference)
            }
        }
        if let referenceSkipped { out += "  reference check skipped: \(referenceSkipped)\n" }
        if recompressed.count > 0 {
            out += String(
                format: "  the %d JPEG sources recompressed as JPEG XL (lossless=true, reconstructable): %@ KB of %@ KB, %.3f×\n", recompressed.count,
                kb(recompressed.jxlBytes) as NSString, kb(recompressed.jpegBytes) as NSString,
                Double(recompressed.jxlBytes) / Double(max(recompressed.jpegBytes, 1)))
        }
        for r in ratios {
            out += "  " + r.label.padding(toLength: 62, withPad: " ", startingAt: 0)
            out += String(format: " %6.2f (want ≤ %.2f) %@\n", r.value, r.bound, r.value <= r.bound ? "passed" : "FAILED")
        }
        return out
    }

    /// `json` as text (what results.json holds under `Q`).
    package var jsonText: String { json.prettyText }

    package var json: JSONValue {
        func round(_ x: Double, _ places: Double = 100) -> JSONValue { .number((x * places).rounded() / places) }
        let n = Double(max(names.count, 1))
        var o: [String: JSONValue] = [
            "resize": .string(QualityBench.resize), "images": .array(names.map { .string($0) }), "target": round(target),
            "fixed_floor_quality": fixedFloor.map { .number(Double($0)) } ?? .null,
            "reference_skipped": referenceSkipped.map { .string($0) } ?? .null,
            "jxl_recompression": [
                "jpegs": .number(Double(recompressed.count)), "jpeg_bytes": .number(Double(recompressed.jpegBytes)),
                "jxl_bytes": .number(Double(recompressed.jxlBytes)),
            ],
        ]
        o["fixed"] = .array(
            QualityBench.scan.map { q in
                [
                    "quality": .number(Double(q)), "bytes": .array((fixed[q] ?? []).map { .number(Double($0.bytes)) }),
                    "scores": .array((fixed[q] ?? []).map { round($0.score) }), "total_bytes": .number(Double(fixedTotal(q))),
                    "lowest_score": round(fixedLowest(q)),
                ]
            })
        o["auto"] = .array(
            autos.map { a in
                let e = a.encodes, d = a.referenceDistances(target: target)
                return [
                    "name": .string(a.name), "chain": .string(a.chain),
                    "bytes": .array(a.outputs.map { .number(Double($0.bytes)) }), "scores": .array(a.outputs.map { round($0.score) }),
                    "reference_scores": .array(a.outputs.map { $0.reference.map { round($0) } ?? .null }),
                    "qualities": .array(a.outputs.map { o in o.quality.map { .number(Double($0) + (o.half ? 0.5 : 0)) } ?? .null }),
                    "formats": .array(a.outputs.map { .string($0.format.rawValue) }),
                    "encodes": .array(a.outputs.map { .number(Double($0.encodes)) }),
                    "total_bytes": .number(Double(a.totalBytes)), "lowest_score": round(a.lowestScore), "highest_score": round(a.highestScore),
                    "encodes_min": .number(Double(e.min)), "encodes_median": .number(Double(e.median)), "encodes_max": .number(Double(e.max)),
                    "cpu_ms_per_job": round(a.cpuSeconds / n * 1000, 10), "wall_ms_per_job": round(a.wallSeconds / n * 1000, 10),
                    "q82_cpu_ms_per_job": round(a.q82CPUSeconds / n * 1000, 10), "q82_wall_ms_per_job": round(a.q82WallSeconds / n * 1000, 10),
                    "format_counts": .object(a.formats.mapValues { .number(Double($0)) }),
                    "max_reference_distance": d.map { round($0.fromTarget) } ?? .null,
                    "max_ours_vs_reference": d.map { round($0.oursFromReference) } ?? .null,
                ]
            })
        o["oracle"] = [
            "bytes": .array(oracles.map { $0.map { .number(Double($0.bytes)) } ?? .null }),
            "qualities": .array(oracles.map { $0.map { .number($0.quality) } ?? .null }),
            "chroma": .array(oracles.map { $0.map { .string($0.chroma.rawValue) } ?? .null }), "total_bytes": .number(Double(oracleTotal)),
        ]
        o["ratios"] = .object(
            Dictionary(
                uniqueKeysWithValues: ratios.map {
                    ($0.key, ["value": round($0.value, 1000), "bound": .number($0.bound), "passed": .bool($0.value <= $0.bound)])
                }))
        return .object(o)
    }
}

extension Bench {
    /// Q: the images of `--q-images` (default: the repository's public photographs and
    /// screenshots), then `QualityBench.run`, with the reference check when a Python has the
    /// `ssimulacra2` package.
    func runQ() async throws -> QualityBench.Run? {
        let sources = qSources()
        guard !sources.isEmpty else {
            print("Q skipped: no images (run from a clone, or name directories of JPEG and PNG files with --q-images)")
            return nil
        }
        let python = QualityBench.referencePython()
        let note = python == nil ? "no Python with the PyPI ssimulacra2 package (scripts/test installs one)" : nil
        return try await Blocking.run(.processing) { try QualityBench.run(sources, python: python, skipNote: note, log: { print($0) }) }
    }
}

extension Bench {
    /// Q's images (and P's real ones): the JPEG and PNG files of `--q-images`, by default the
    /// repository's public photographs and screenshots; `--scale` below 1 takes the first only
    /// (at least two), as the other scenarios shrink their corpus.
    func qSources() -> [QualityBench.Source] {
        var directories = qImages.map { URL(fileURLWithPath: $0) }
        if directories.isEmpty {
            for (name, marker) in [("Tests/Fixtures/public/photos", "tiger.jpg"), ("Tests/Fixtures/screenshots", "docs-architecture.png")] {
                if let found = try? ResourceLocator.find(name, marker: marker, environment: "HALCYON_BENCH_Q_UNSET").found {
                    directories.append(found)
                }
            }
        }
        let all = QualityBench.sources(in: directories)
        return scale < 1 ? Array(all.prefix(max(2, Int((Double(all.count) * scale).rounded())))) : all
    }
}

extension QualityBench {
    /// The JPEG and PNG files of `directories`, by name.
    package static func sources(in directories: [URL]) -> [Source] {
        directories.flatMap { dir in
            ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted().compactMap { name -> Source? in
                let format: ImageFormat
                switch (name as NSString).pathExtension.lowercased() {
                case "jpg", "jpeg": format = .jpeg
                case "png": format = .png
                default: return nil
                }
                return FileManager.default.contents(atPath: dir.appendingPathComponent(name).path).map {
                    Source(name: name, data: $0, format: format)
                }
            }
        }
    }
}
