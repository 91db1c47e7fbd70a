import Foundation
import HalcyonCLI
import HalcyonChain
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime
import HalcyonSamples

/// `halcyon bench`'s P: a picture set (`breakpoints`) against the fixed ladder a site would
/// configure instead, in-process, one image at a time on one thread. Per image, the set's rungs
/// and bytes per format; the ladder's — 320/640/960/1280/1600 (capped at the image's width) in
/// each format at the lowest fixed quality that holds the set's floor on every rung of every
/// image (a fixed configuration's one quality), and at each image's own lowest (a ladder's best
/// case); the bytes a visitor fetches at common viewports from each; and the CPU of each.
enum PictureSetBench {
    /// The set: the step's defaults, spelled out.
    static let chain = "breakpoints(min_width=320,max_width=1600,bytes_step=20000,max_images=8,formats=avif|webp|jpeg,min_score=80)"
    static let ladderWidths = [320, 640, 960, 1280, 1600]
    /// In the `<picture>`'s order: AVIF first (what Chromium picks), JPEG the `<img>`.
    static let formats: [ImageFormat] = [.avif, .webp, .jpeg]
    /// The floor (SSIMULACRA2) the set's rungs are searched to and the ladder's quality must hold.
    static let floor = 80.0
    static let viewports = [360, 768, 1280, 1920]
    static let dprs = [1, 2]
    /// The generated corpus's 4032×3024 JPEGs P takes (× --scale, at least 1).
    static let corpusImages = 5

    /// One ladder rung's chain.
    static func ladderChain(width: Int, format: ImageFormat, quality: Int) -> String {
        "resize(\(width)x16384) |> format(\(format.rawValue), quality=\(quality))"
    }

    enum Group: String, Sendable, CaseIterable {
        case real = "photographs and screenshots"
        case corpus = "generated 4032×3024"
        var key: String { self == .real ? "real" : "corpus" }
        var short: String { self == .real ? "photos+screenshots" : "corpus 4032×3024" }
    }

    struct Source: Sendable {
        var name: String
        var data: Data
        var format: ImageFormat
        var group: Group
    }

    /// One encoded rung, without its bytes.
    struct Rung: Sendable {
        var width: Int
        var bytes: Int
        var quality: Int?
        var half = false
        var score: Double?
        /// A JPEG's chroma sampling.
        var chroma: ChromaSampling?
        var missesFloor: Bool { score.map { $0 < PictureSetBench.floor } ?? false }
    }

    struct Image: Sendable {
        var name: String
        var group: Group
        var width: Int
        var height: Int
        /// The set's rungs per format, narrowest first.
        var set: [ImageFormat: [Rung]] = [:]
        var setCPU = 0.0
        var setWall = 0.0
        var setEncodes = 0
        var ladderWidths: [Int] = []
        /// The ladder at the run's quality per format (scored), and its CPU (decode, resizes,
        /// the 3 × widths encodes; no score).
        var ladder: [ImageFormat: [Rung]] = [:]
        var ladderCPU = 0.0
        /// This image's own lowest quality holding the floor on its every rung (absent: none up
        /// to 100), and its ladder at that quality (at 100 when none).
        var ownQuality: [ImageFormat: Int] = [:]
        var ladderOwn: [ImageFormat: [Rung]] = [:]

        func bytes(_ rungs: [ImageFormat: [Rung]], _ format: ImageFormat) -> Int { rungs[format]?.reduce(0) { $0 + $1.bytes } ?? 0 }

        /// What a browser fetches at `need` device pixels (sizes=100vw) from `rungs`: the first of
        /// `order` with rungs, its narrowest at least `need` wide, else its widest.
        static func fetched(_ rungs: [ImageFormat: [Rung]], need: Int, order: [ImageFormat]) -> (format: ImageFormat, rung: Rung)? {
            guard let format = order.first(where: { !(rungs[$0] ?? []).isEmpty }), let own = rungs[format] else { return nil }
            return (format, own.first { $0.width >= need } ?? own[own.count - 1])
        }
    }

    struct Run: Sendable {
        var images: [Image]
        /// The ladder's quality per format, and whether it held the floor everywhere (false:
        /// not even 100 did on some rung).
        var quality: [ImageFormat: Int]
        var held: [ImageFormat: Bool]
        /// The quality search's encodes and wall seconds (not in the ladder's CPU).
        var searchEncodes = 0
        var searchSeconds = 0.0
        var seconds = 0.0
        /// Where the generated images came from.
        var corpusNote: String
        /// The sets a worker's default limits refuse (`image.too_costly`), with the message.
        var refused: [(image: String, message: String)] = []
    }

    /// Blocking: call from a Dispatch thread.
    static func run(_ sources: [Source], corpusNote: String, log: (String) -> Void = { _ in }) throws -> Run {
        guard !sources.isEmpty else { throw CommandFailure("P: no images") }
        let started = ContinuousClock.now
        let setChain = try ProcessorChain.parse(chain)
        var images: [Image] = []
        // A set a worker's default limits refuse (its estimate over --max-job-time's work) is
        // noted and made under a longer deadline.
        var longer = ImageLimits()
        longer.maxJobTime = .seconds(3600)
        var refused: [(image: String, message: String)] = []
        for s in sources {
            let wall = ContinuousClock.now
            var measured = ImagePipeline.measured(s.data, format: s.format, chains: [setChain])
            if case .success(let results) = measured.outcome, case .failure(let error) = results[0], error.code == .tooCostly {
                refused.append((s.name, error.message))
                log("P: \(s.name): refused at the default limits (\(error.message)); made with --max-job-time 3600s")
                measured = ImagePipeline.measured(s.data, format: s.format, chains: [setChain], limits: longer)
            }
            let out = try measured.outcome.get()[0].get()
            guard let rungs = out.rungs, let facts = out.source else { throw CommandFailure("P: \(s.name): no picture set") }
            let (w, h) = facts.orientation >= 5 ? (facts.height, facts.width) : (facts.width, facts.height)
            var image = Image(name: s.name, group: s.group, width: w, height: h)
            for r in rungs {
                image.set[r.format, default: []].append(
                    Rung(width: r.width, bytes: r.data.count, quality: r.quality, half: r.halfQuality, score: r.score, chroma: r.chroma))
            }
            (image.setCPU, image.setWall, image.setEncodes) = (measured.cost.cpu, (ContinuousClock.now - wall).seconds, out.encodes)
            image.ladderWidths = Array(Set(ladderWidths.map { min($0, w) })).sorted()
            images.append(image)
            log(
                String(
                    format: "P: %@ %d×%d set in %.1f s CPU (%d encodes): %@", s.name, w, h, image.setCPU, out.encodes,
                    formats.map { f in "\(f.rawValue) " + (image.set[f] ?? []).map { "\($0.width)" }.joined(separator: "/") }.joined(
                        separator: ", ")))
        }

        // Each image's lowest quality per format: a bisection over 1…100 on "every rung scores
        // at least the floor", each probe the image's whole ladder in that format, scored.
        let searchStarted = ContinuousClock.now
        var cache: [[ImageFormat: [Int: [Rung]]]] = Array(repeating: [:], count: sources.count)
        var searchEncodes = 0
        func probe(_ i: Int, _ format: ImageFormat, _ q: Int) throws -> [Rung] {
            if let hit = cache[i][format]?[q] { return hit }
            let chains = try images[i].ladderWidths.map { try ProcessorChain.parse(ladderChain(width: $0, format: format, quality: q)) }
            let results = try ImagePipeline.run(sources[i].data, format: sources[i].format, chains: chains, scores: chains.map { _ in true })
            let rungs = try results.map { r in
                let o = try r.get()
                return Rung(width: o.width, bytes: o.data.count, quality: o.quality, half: o.halfQuality, score: o.score, chroma: o.chroma)
            }
            searchEncodes += rungs.count
            cache[i][format, default: [:]][q] = rungs
            return rungs
        }
        func holds(_ i: Int, _ format: ImageFormat, _ q: Int) throws -> Bool { try probe(i, format, q).allSatisfy { !$0.missesFloor } }
        for i in images.indices {
            for format in formats {
                var lo = 0, hi = 100  // `lo` misses (by convention), `hi` holds (checked at the end)
                while hi - lo > 1 {
                    let mid = (lo + hi) / 2
                    if try holds(i, format, mid) { hi = mid } else { lo = mid }
                }
                let held = try holds(i, format, hi)
                if held { images[i].ownQuality[format] = hi }
                images[i].ladderOwn[format] = try probe(i, format, hi)
            }
            log(
                "P: \(images[i].name) lowest quality holding \(formatNumber(floor)) on every ladder rung: "
                    + formats.map { "\($0.rawValue) " + (images[i].ownQuality[$0].map { "q\($0)" } ?? "none") }.joined(separator: ", "))
        }
        // The run's quality: the highest of the images' own, raised while some image's rung
        // still misses there (a score need not rise with the quality everywhere).
        var quality: [ImageFormat: Int] = [:], held: [ImageFormat: Bool] = [:]
        for format in formats {
            var q = images.map { $0.ownQuality[format] ?? 100 }.max() ?? 100
            var ok = try images.indices.allSatisfy { try holds($0, format, q) }
            while !ok, q < 100 {
                q += 1
                ok = try images.indices.allSatisfy { try holds($0, format, q) }
            }
            (quality[format], held[format]) = (q, ok)
            for i in images.indices { images[i].ladder[format] = try probe(i, format, q) }
        }
        let searchSeconds = (ContinuousClock.now - searchStarted).seconds
        log(
            "P: the ladder's quality: "
                + formats.map { "\($0.rawValue) q\(quality[$0]!)" + (held[$0]! ? "" : " (misses the floor)") }
                .joined(separator: ", ") + String(format: " (%d encodes, %.0f s)", searchEncodes, searchSeconds))

        // The ladder as a fixed configuration runs it: one decode, every width in every format
        // at the run's quality, nothing scored. Its CPU; the bytes are the search's (the same
        // encodes), checked.
        for i in images.indices {
            let widths = images[i].ladderWidths
            let chains = try formats.flatMap { f in
                try widths.map { try ProcessorChain.parse(ladderChain(width: $0, format: f, quality: quality[f]!)) }
            }
            let measured = ImagePipeline.measured(sources[i].data, format: sources[i].format, chains: chains)
            let outs = try measured.outcome.get().map { try $0.get() }
            images[i].ladderCPU = measured.cost.cpu
            for (k, f) in formats.enumerated() {
                for (j, rung) in (images[i].ladder[f] ?? []).enumerated() where outs[k * widths.count + j].data.count != rung.bytes {
                    log(
                        "P: \(images[i].name) \(f.rawValue) \(rung.width): \(outs[k * widths.count + j].data.count) bytes, \(rung.bytes) in the search"
                    )
                }
            }
        }
        return Run(
            images: images, quality: quality, held: held, searchEncodes: searchEncodes, searchSeconds: searchSeconds,
            seconds: (ContinuousClock.now - started).seconds, corpusNote: corpusNote, refused: refused)
    }
}

// MARK: - The report

extension PictureSetBench.Run {
    typealias Image = PictureSetBench.Image
    private static var formats: [ImageFormat] { PictureSetBench.formats }

    /// What a visitor fetches at one viewport and DPR, per image: the bytes of the set's and the
    /// ladder's pick, in AVIF (the `<picture>`'s first source, what Chromium takes) and in JPEG
    /// (the fallback `<img>`).
    struct Fetch {
        var viewport: Int
        var dpr: Int
        var need: Int { viewport * dpr }
        var setAVIF: [Int] = []
        var ladderAVIF: [Int] = []
        var setJPEG: [Int] = []
        var ladderJPEG: [Int] = []
        /// The ladder at each image's own lowest quality.
        var ownAVIF: [Int] = []
        var ownJPEG: [Int] = []
        /// Images whose set had no AVIF rung (the browser took the next source's).
        var setWithoutAVIF = 0
    }

    func fetches(_ images: [Image]) -> [Fetch] {
        PictureSetBench.viewports.flatMap { v in
            PictureSetBench.dprs.map { d in
                var f = Fetch(viewport: v, dpr: d)
                for image in images {
                    let set = Image.fetched(image.set, need: f.need, order: Self.formats)
                    f.setAVIF.append(set?.rung.bytes ?? 0)
                    if set?.format != .avif { f.setWithoutAVIF += 1 }
                    f.ladderAVIF.append(Image.fetched(image.ladder, need: f.need, order: Self.formats)?.rung.bytes ?? 0)
                    f.setJPEG.append(Image.fetched(image.set, need: f.need, order: [.jpeg])?.rung.bytes ?? 0)
                    f.ladderJPEG.append(Image.fetched(image.ladder, need: f.need, order: [.jpeg])?.rung.bytes ?? 0)
                    f.ownAVIF.append(Image.fetched(image.ladderOwn, need: f.need, order: Self.formats)?.rung.bytes ?? 0)
                    f.ownJPEG.append(Image.fetched(image.ladderOwn, need: f.need, order: [.jpeg])?.rung.bytes ?? 0)
                }
                return f
            }
        }
    }

    /// The set's rungs below the floor: (image, format, width, score).
    var misses: [(image: String, format: ImageFormat, width: Int, score: Double)] {
        images.flatMap { image in
            Self.formats.flatMap { f in
                (image.set[f] ?? []).filter(\.missesFloor).map { (image.name, f, $0.width, $0.score ?? 0) }
            }
        }
    }

    /// The images of `group` (nil: all).
    func images(_ group: PictureSetBench.Group?) -> [Image] { images.filter { group == nil || $0.group == group } }

    /// The groups present, then all (when both are).
    private var groups: [(label: String, group: PictureSetBench.Group?)] {
        let present = PictureSetBench.Group.allCases.filter { g in images.contains { $0.group == g } }
        return present.map { ($0.short, $0) } + (present.count > 1 ? [("all", nil)] : [])
    }

    private static func kb(_ bytes: Int) -> String { String(format: "%.1f", Double(bytes) / 1024) }
    private static func ratio(_ a: Int, _ b: Int) -> String { b == 0 ? "—" : String(format: "%.2f×", Double(a) / Double(b)) }
    /// `text` right-aligned (`width` > 0) or left-aligned (`width` < 0) in `|width|` columns.
    private static func cell(_ text: String, _ width: Int) -> String {
        let pad = String(repeating: " ", count: max(0, abs(width) - text.count))
        return width < 0 ? text + pad : pad + text
    }

    var table: String {
        let c = Self.cell
        let real = images(.real).count, corpus = images(.corpus).count
        var out = "P — picture sets: \(PictureSetBench.chain)\n"
        out +=
            "  against a fixed ladder \(PictureSetBench.ladderWidths.map(String.init).joined(separator: "/")) (each capped at the image's width, "
            + "duplicates dropped), resize(Wx16384) |> format(F, quality=Q) per format F; in-process, one image at a time, one thread\n"
        out += "  images: \(real) photographs and screenshots (Q's) + \(corpus) \(corpusNote)\n"
        out +=
            "  the ladder's Q (the lowest fixed quality holding SSIMULACRA2 ≥ \(formatNumber(PictureSetBench.floor)) on every rung of every image; bisection over 1–100): "
            + Self.formats.map { "\($0.rawValue) q\(quality[$0]!)" + (held[$0]! ? "" : " (none holds it: some rung misses even at 100)") }
            .joined(separator: ", ") + "\n"
        out +=
            "  each image's own lowest Q (a ladder's best case), min/median/max: "
            + Self.formats.map { f in
                let qs = images.compactMap { $0.ownQuality[f] }.sorted()
                let none = images.count - qs.count
                return "\(f.rawValue) "
                    + (qs.isEmpty ? "none" : "q\(qs[0])/q\(qs[(qs.count - 1) / 2])/q\(qs[qs.count - 1])") + (none > 0 ? " (\(none) none)" : "")
            }.joined(separator: ", ") + "\n"
        out +=
            "  per image and format: the set's widths and KB; the ladder's KB at the run's Q and at the image's own lowest Q, and the set against each\n"
        for image in images {
            out += "    \(image.name) \(image.width)×\(image.height) — ladder \(image.ladderWidths.map(String.init).joined(separator: "/"))"
            out += String(format: "; CPU: set %.2f s (%d encodes), ladder %.2f s\n", image.setCPU, image.setEncodes, image.ladderCPU)
            for f in Self.formats {
                let set = image.bytes(image.set, f), ladder = image.bytes(image.ladder, f), own = image.bytes(image.ladderOwn, f)
                let widths = (image.set[f] ?? []).map { "\($0.width)" }.joined(separator: "/")
                let ownQ = image.ownQuality[f].map { "q\($0)" } ?? "none"
                out += "      " + c(f.rawValue, -5) + c(widths.isEmpty ? "—" : widths, -40) + c(Self.kb(set), 8) + " KB"
                out += " | ladder " + c("q\(quality[f]!)", -4) + c(Self.kb(ladder), 8) + " KB, set " + c(Self.ratio(set, ladder), 6)
                out += " | own " + c(ownQ, -4) + c(Self.kb(own), 8) + " KB, set " + c(Self.ratio(set, own), 6) + "\n"
            }
        }
        out += "  totals per format\n"
        out +=
            "    " + c("images", -24) + c("fmt", -5) + c("set rungs", 10) + c("set KB", 10) + c("ladder rungs", 14) + c("ladder KB", 11)
            + c("set/ladder", 12) + c("own-Q ladder KB", 17) + c("set/own", 9) + "\n"
        for (label, group) in groups {
            let chosen = images(group)
            for f in Self.formats {
                let set = chosen.reduce(0) { $0 + $1.bytes($1.set, f) }, ladder = chosen.reduce(0) { $0 + $1.bytes($1.ladder, f) }
                let own = chosen.reduce(0) { $0 + $1.bytes($1.ladderOwn, f) }
                let setRungs = chosen.reduce(0) { $0 + ($1.set[f]?.count ?? 0) }, ladderRungs = chosen.reduce(0) { $0 + ($1.ladder[f]?.count ?? 0) }
                out +=
                    "    " + c("\(label) (\(chosen.count))", -24) + c(f.rawValue, -5) + c("\(setRungs)", 10) + c(Self.kb(set), 10)
                    + c("\(ladderRungs)", 14) + c(Self.kb(ladder), 11) + c(Self.ratio(set, ladder), 12) + c(Self.kb(own), 17)
                    + c(Self.ratio(set, own), 9) + "\n"
            }
        }
        out +=
            "  KB a visitor fetches, sizes=100vw (need = viewport × DPR; the narrowest rung at least that wide, else the widest): "
            + "total over the images (median per image);\n    AVIF: the <picture>'s first source, what Chromium takes; JPEG: the <img>; "
            + "own-Q ladder: the ladder at each image's own lowest Q\n"
        for (label, group) in groups {
            let chosen = images(group)
            out += "    \(label) (\(chosen.count) images)\n"
            out +=
                "    " + c("viewport", 8) + c("DPR", 4) + c("need", 6) + c("AVIF set", 16) + c("ladder", 16) + c("own-Q ladder", 16)
                + c("set/ladder", 11) + c("set/own", 8) + " |" + c("JPEG set", 16) + c("ladder", 16) + c("own-Q ladder", 16) + c("set/ladder", 11)
                + c("set/own", 8) + "\n"
            for f in fetches(chosen) {
                func kb(_ v: [Int]) -> String { "\(Self.kb(v.reduce(0, +))) (\(Self.kb(Int(median(v.map(Double.init)).rounded()))))" }
                func ratio(_ a: [Int], _ b: [Int]) -> String { Self.ratio(a.reduce(0, +), b.reduce(0, +)) }
                out +=
                    "    " + c("\(f.viewport)", 8) + c("\(f.dpr)", 4) + c("\(f.need)", 6) + c(kb(f.setAVIF), 16) + c(kb(f.ladderAVIF), 16)
                    + c(kb(f.ownAVIF), 16) + c(ratio(f.setAVIF, f.ladderAVIF), 11) + c(ratio(f.setAVIF, f.ownAVIF), 8) + " |" + c(kb(f.setJPEG), 16)
                    + c(kb(f.ladderJPEG), 16) + c(kb(f.ownJPEG), 16) + c(ratio(f.setJPEG, f.ladderJPEG), 11) + c(ratio(f.setJPEG, f.ownJPEG), 8)
                    + "\n"
            }
            if let without = fetches(chosen).first?.setWithoutAVIF, without > 0 {
                out += "    (\(without) of the sets have no AVIF rung: their AVIF set column is the next source's bytes)\n"
            }
        }
        out += "  CPU seconds per image (one thread, decode included; the ladder's: its encodes at the run's Q, not the search)\n"
        for (label, group) in groups {
            let chosen = images(group)
            let set = chosen.map(\.setCPU), ladder = chosen.map(\.ladderCPU)
            out +=
                "    " + c("\(label) (\(chosen.count))", -24)
                + String(
                    format: "set median %.2f (total %.1f), ladder median %.2f (total %.1f): set %.1f× the ladder\n", median(set), set.reduce(0, +),
                    median(ladder), ladder.reduce(0, +), set.reduce(0, +) / max(ladder.reduce(0, +), 1e-9))
        }
        out += String(format: "  the ladder's quality search: %d encodes, each scored, %.0f s (not counted above)\n", searchEncodes, searchSeconds)
        let top = Self.formats.compactMap { f -> String? in
            let at100 = images.flatMap { image in (image.set[f] ?? []).filter { $0.quality == 100 }.map { _ in image.name } }
            guard !at100.isEmpty else { return nil }
            let all = images.reduce(0) { $0 + ($1.set[f]?.count ?? 0) }
            return "\(f.rawValue) \(at100.count) of \(all) (" + Array(Set(at100)).sorted().joined(separator: ", ") + ")"
        }
        if !top.isEmpty {
            out +=
                "  set rungs at quality 100 (for WebP lossless: no lossy quality reached the floor): " + top.joined(separator: "; ") + "\n"
        }
        let misses = misses
        out += "  set rungs below the floor (SSIMULACRA2 < \(formatNumber(PictureSetBench.floor))): "
        out +=
            misses.isEmpty
            ? "none\n"
            : "\(misses.count): "
                + misses.map { String(format: "%@ %@ %d (%.1f)", $0.image, $0.format.rawValue, $0.width, $0.score) }.joined(separator: ", ") + "\n"
        let ladderMisses = Self.formats.compactMap { f -> String? in
            let names = images.filter { ($0.ladder[f] ?? []).contains(where: \.missesFloor) }.map(\.name)
            guard !names.isEmpty else { return nil }
            let rungs = images.reduce(0) { $0 + ($1.ladder[f] ?? []).filter(\.missesFloor).count }
            return "\(f.rawValue) q\(quality[f]!): \(rungs) (" + names.joined(separator: ", ") + ")"
        }
        if !ladderMisses.isEmpty { out += "  ladder rungs below the floor at the run's Q: " + ladderMisses.joined(separator: "; ") + "\n" }
        if !refused.isEmpty {
            out +=
                "  refused at a worker's default limits (--max-job-time 120s; made here with a longer deadline): "
                + refused.map(\.image).joined(separator: ", ") + " — " + (refused.first?.message ?? "") + "\n"
        }
        out += String(format: "  P took %.0f s\n", seconds)
        return out
    }

    var json: JSONValue {
        func round(_ x: Double, _ places: Double = 100) -> JSONValue { .number((x * places).rounded() / places) }
        func number(_ n: Int) -> JSONValue { .number(Double(n)) }
        func rungs(_ r: [PictureSetBench.Rung]) -> JSONValue {
            [
                "widths": .array(r.map { number($0.width) }), "bytes": .array(r.map { number($0.bytes) }),
                "total_bytes": number(r.reduce(0) { $0 + $1.bytes }),
                "qualities": .array(r.map { x in x.quality.map { .number(Double($0) + (x.half ? 0.5 : 0)) } ?? .null }),
                "scores": .array(r.map { $0.score.map { round($0) } ?? .null }),
                "chroma": .array(r.map { $0.chroma.map { .string($0.rawValue) } ?? .null }),
            ]
        }
        func perFormat(_ r: [ImageFormat: [PictureSetBench.Rung]]) -> JSONValue {
            .object(Dictionary(uniqueKeysWithValues: Self.formats.map { ($0.rawValue, rungs(r[$0] ?? [])) }))
        }
        func fetchJSON(_ images: [Image]) -> JSONValue {
            .array(
                fetches(images).map { f in
                    [
                        "viewport": number(f.viewport), "dpr": number(f.dpr), "need": number(f.need),
                        "set_avif_bytes": .array(f.setAVIF.map(number)), "ladder_avif_bytes": .array(f.ladderAVIF.map(number)),
                        "set_jpeg_bytes": .array(f.setJPEG.map(number)), "ladder_jpeg_bytes": .array(f.ladderJPEG.map(number)),
                        "own_quality_ladder_avif_bytes": .array(f.ownAVIF.map(number)),
                        "own_quality_ladder_jpeg_bytes": .array(f.ownJPEG.map(number)),
                        "own_quality_ladder_avif_total": number(f.ownAVIF.reduce(0, +)),
                        "own_quality_ladder_jpeg_total": number(f.ownJPEG.reduce(0, +)),
                        "set_avif_total": number(f.setAVIF.reduce(0, +)), "ladder_avif_total": number(f.ladderAVIF.reduce(0, +)),
                        "set_jpeg_total": number(f.setJPEG.reduce(0, +)), "ladder_jpeg_total": number(f.ladderJPEG.reduce(0, +)),
                        "set_avif_median": round(median(f.setAVIF.map(Double.init)), 1),
                        "ladder_avif_median": round(median(f.ladderAVIF.map(Double.init)), 1),
                        "set_jpeg_median": round(median(f.setJPEG.map(Double.init)), 1),
                        "ladder_jpeg_median": round(median(f.ladderJPEG.map(Double.init)), 1),
                        "sets_without_avif": number(f.setWithoutAVIF),
                    ]
                })
        }
        var totals: [String: JSONValue] = [:]
        for (key, group) in [("all", nil)] + PictureSetBench.Group.allCases.map({ ($0.key, Optional($0)) }) {
            let chosen = images(group)
            guard !chosen.isEmpty else { continue }
            var o: [String: JSONValue] = [
                "images": number(chosen.count), "set_cpu_seconds": round(chosen.reduce(0) { $0 + $1.setCPU }, 1000),
                "ladder_cpu_seconds": round(chosen.reduce(0) { $0 + $1.ladderCPU }, 1000),
                "set_cpu_seconds_median": round(median(chosen.map(\.setCPU)), 1000),
                "ladder_cpu_seconds_median": round(median(chosen.map(\.ladderCPU)), 1000), "fetches": fetchJSON(chosen),
            ]
            for f in Self.formats {
                o["\(f.rawValue)_set_bytes"] = number(chosen.reduce(0) { $0 + $1.bytes($1.set, f) })
                o["\(f.rawValue)_ladder_bytes"] = number(chosen.reduce(0) { $0 + $1.bytes($1.ladder, f) })
                o["\(f.rawValue)_own_quality_ladder_bytes"] = number(chosen.reduce(0) { $0 + $1.bytes($1.ladderOwn, f) })
                o["\(f.rawValue)_set_rungs"] = number(chosen.reduce(0) { $0 + ($1.set[f]?.count ?? 0) })
                o["\(f.rawValue)_ladder_rungs"] = number(chosen.reduce(0) { $0 + ($1.ladder[f]?.count ?? 0) })
            }
            totals[key] = .object(o)
        }
        let o: [String: JSONValue] = [
            "chain": .string(PictureSetBench.chain), "ladder_widths": .array(PictureSetBench.ladderWidths.map(number)),
            "floor": .number(PictureSetBench.floor), "corpus": .string(corpusNote),
            "ladder_quality": .object(Dictionary(uniqueKeysWithValues: Self.formats.map { ($0.rawValue, number(quality[$0]!)) })),
            "ladder_quality_held": .object(Dictionary(uniqueKeysWithValues: Self.formats.map { ($0.rawValue, .bool(held[$0]!)) })),
            "images": .array(
                images.map { image in
                    [
                        "name": .string(image.name), "group": .string(image.group.key), "width": number(image.width),
                        "height": number(image.height), "set": perFormat(image.set), "set_cpu_seconds": round(image.setCPU, 1000),
                        "set_encodes": number(image.setEncodes), "ladder_widths": .array(image.ladderWidths.map(number)),
                        "ladder": perFormat(image.ladder), "ladder_cpu_seconds": round(image.ladderCPU, 1000),
                        "own_quality": .object(
                            Dictionary(
                                uniqueKeysWithValues: Self.formats.map { f in (f.rawValue, image.ownQuality[f].map(number) ?? .null) })),
                        "own_quality_ladder": perFormat(image.ladderOwn),
                    ]
                }),
            "totals": .object(totals),
            "set_rungs_below_floor": .array(
                misses.map {
                    ["image": .string($0.image), "format": .string($0.format.rawValue), "width": number($0.width), "score": round($0.score)]
                }
            ),
            "refused_at_default_limits": .array(refused.map { ["image": .string($0.image), "message": .string($0.message)] }),
            "search_encodes": number(searchEncodes), "search_seconds": round(searchSeconds, 10), "seconds": round(seconds, 10),
        ]
        return .object(o)
    }
}

extension Bench {
    /// P: Q's images and the first of the corpus's 4032×3024 JPEGs (× --scale, at least one),
    /// made here alone when the corpus has not been generated yet — the same files, names and
    /// seeds as `BenchCorpus`, so the corpus reuses them.
    func runPictureSets(home: URL) async throws -> PictureSetBench.Run {
        var sources = qSources().map { PictureSetBench.Source(name: $0.name, data: $0.data, format: $0.format, group: .real) }
        let kind = BenchCorpus.kinds.first { $0.width == 4032 && $0.height == 3024 }!
        let count = max(1, Int((Double(PictureSetBench.corpusImages) * scale).rounded()))
        let directory = home.appendingPathComponent("corpus")
        let names = (0..<count).map { BenchCorpus.fileName(kind, $0) }
        let missing = (0..<count).filter { !FileManager.default.fileExists(atPath: directory.appendingPathComponent(names[$0]).path) }
        if !missing.isEmpty {
            print("P: generating \(missing.count) of the corpus's \(kind.width)×\(kind.height) JPEGs in \(directory.path)…")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try await Blocking.run(.processing) {
                for i in missing {
                    try SampleImages.photo(
                        width: kind.width, height: kind.height, seed: BenchCorpus.seed(kind, i), format: kind.format, quality: kind.quality,
                        alpha: kind.alpha
                    ).write(to: directory.appendingPathComponent(names[i]), options: .atomic)
                }
            }
        }
        for name in names {
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else {
                throw CommandFailure("P: cannot read corpus image \(name)")
            }
            sources.append(PictureSetBench.Source(name: name, data: data, format: kind.format, group: .corpus))
        }
        let note = "generated \(kind.width)×\(kind.height) \(kind.label) (the bench corpus's first \(count))"
        let all = sources
        return try await Blocking.run(.processing) { try PictureSetBench.run(all, corpusNote: note, log: { print($0) }) }
    }
}
