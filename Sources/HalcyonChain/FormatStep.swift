import HalcyonDomain

/// `format(jpeg|png|webp|gif|avif|jxl|auto, quality=85|auto, progressive=false, max_bytes=none,
/// min_quality=10, compression=6, min_score=80, formats=jpeg|webp|avif, effort=7, lossless=false,
/// keep_metadata=false)` — the output encoding (Kingfisher's `FormatIndicatedCacheSerializer`).
///
/// `quality` (1–100) applies to jpeg, webp, avif and jxl; `quality=auto` picks, per image, the lowest
/// quality whose output scores at least `min_score` (SSIMULACRA2, 30–95) against the chain's own
/// pixels. `format(auto)` also picks the format: the smallest of `formats` that reaches the
/// score. `progressive` applies to jpeg (progressive scan) and png (Adam7 interlace);
/// `max_bytes` (with `min_quality`) to the formats with a quality; `compression` (zlib's level,
/// 0–9) to png; `effort` (libjxl's, 1–9), `lossless` and `keep_metadata` to jxl. Parameters that
/// mean nothing for a format, an absent `max_bytes` and the default `compression` are left out of
/// its identifier.
public struct FormatStep: ChainStepDefinition {
    /// The formats a chain may ask for by name.
    public enum Format: String, Sendable, CaseIterable {
        case jpeg, png, webp, gif, avif, jxl

        /// The encoding this name asks for.
        public var imageFormat: ImageFormat {
            switch self {
            case .jpeg: .jpeg
            case .png: .png
            case .webp: .webp
            case .gif: .gif
            case .avif: .avif
            case .jxl: .jxl
            }
        }
        var hasQuality: Bool { imageFormat.hasQuality }
        /// Whether `progressive=true` means something for it (jpeg's progressive scan, png's interlace).
        package var canBeProgressive: Bool { [.jpeg, .png].contains(self) }
    }
    public static let name = "format"
    /// The output format; nil for `format(auto)`, which chooses one of `formats` per image.
    public var format: Format?
    /// The formats `format(auto)` may choose, in the order they are tried (cheapest encoder
    /// first); `[format]` otherwise.
    public var formats: [Format]
    /// The quality, or with `quality=auto` the highest the search may use (100).
    public var quality: Int
    /// `quality=auto` or `format(auto)`: the SSIMULACRA2 score the output must reach; nil for
    /// a fixed quality.
    public var minScore: Double?
    public var progressive: Bool
    /// The most bytes the output may have: the quality is lowered (a binary search, down to
    /// `minQuality`) until it fits, else `image.over_max_bytes`. Nil: no limit.
    public var maxBytes: Int?
    /// The lowest quality either search may use (or `quality` when that is lower).
    public var minQuality = 10
    /// PNG's zlib level: 0 (stored) to 9 (smallest, slowest). The pixels are the same at every
    /// level; 6 is zlib's, libpng's and Pillow's default, and on photographs about 2–3 % larger
    /// than ImageMagick's 7 for a fifth less CPU per image.
    public var compression = FormatStep.defaultCompression
    public static let defaultCompression = 6
    /// libjxl's effort (jxl only): 1 fastest … 9 smallest. 7 is libjxl's default. Above 7 the
    /// encoder's memory grows about fivefold and its time tenfold, so an output of more than
    /// `jxlHighEffortPixels` is encoded at 7 whatever was asked (`jxlEffort(_:for:)`).
    public var effort = FormatStep.defaultEffort
    public static let defaultEffort = 7
    public static let effortRange = 1...9
    /// jxl only: a lossless output — from an untouched JPEG source (a chain of this step alone),
    /// the JPEG's own coded data recompressed, reconstructable byte for byte (`djxl`); from
    /// anything else, the chain's 8-bit sRGB pixels exactly. Takes no quality.
    public var lossless = false
    /// With `lossless=true` on an untouched JPEG: keep its metadata (EXIF with any GPS position,
    /// XMP, comments, bytes after the image), so that `djxl` gives back the original file byte
    /// for byte. Without it the metadata is dropped first, as from every other output (the
    /// orientation is kept): `djxl` gives back the JPEG's image data byte for byte.
    public var keepMetadata = false
    /// The score `quality=auto` aims at when the step names none: "very high quality" on
    /// SSIMULACRA2's scale (no difference seen side by side at 1:1; 90 is visually lossless,
    /// 70 high, 50 medium, 30 low).
    public static let defaultMinScore = 80.0
    /// The scores a job may ask for.
    public static let minScoreRange = 30.0...95.0
    /// The formats `format(auto)` chooses from when the step names none: all three. AVIF is the
    /// smallest at a given score on most photographs and costs several times the encode time of
    /// the others; `formats=jpeg|webp` leaves it out.
    public static let defaultAutoFormats: [Format] = [.jpeg, .webp, .avif]
    /// The formats `format(auto)` may name, in the order they are tried.
    public static let autoFormats: [Format] = [.jpeg, .webp, .avif, .jxl]

    /// Outputs of more than this many pixels are encoded at effort 7 at most. Measured with
    /// libjxl 0.7 on one thread (a 12-megapixel photograph): efforts 3–7 hold about 48 bytes a
    /// pixel, 8 and 9 about 260 (3.2 GB) and take 8–15× the time of 7 (33 s and 63 s).
    public static let jxlHighEffortPixels = 1_000_000

    /// The effort an output of `pixels` pixels is encoded at when `effort` is asked.
    public static func jxlEffort(_ effort: Int, for pixels: Int) -> Int {
        pixels > jxlHighEffortPixels ? min(effort, defaultEffort) : effort
    }

    /// Whether the quality is chosen per image by a score.
    public var isPerceptual: Bool { minScore != nil }

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(
            step,
            keys: [
                "format", "quality", "progressive", "max_bytes", "min_quality", "compression", "min_score", "formats", "effort", "lossless",
                "keep_metadata",
            ])
        let isAuto = a.peekWord("format") == "auto"
        if isAuto {
            _ = a.take("format")
            format = nil
        } else {
            format = try a.choice("format") as Format
        }
        let named = Set(step.arguments.compactMap(\.key))
        let what = "'\(step.name)(\(format?.rawValue ?? "auto"))'"
        func refuse(_ found: String, _ expected: String) -> ChainError {
            ChainError(position: step.position, found: "\(what) with \(found)", expected: expected)
        }
        let hasQuality = format?.hasQuality ?? true
        if named.contains("lossless") {
            guard format == .jxl else { throw refuse("lossless", "lossless only with jxl") }
            lossless = try a.bool("lossless", default: false)
            if lossless {
                for key in ["quality", "max_bytes", "min_quality", "min_score"] where named.contains(key) {
                    throw refuse("lossless=true and \(key)", "lossless=true alone: a lossless output has no quality")
                }
            }
        }
        let autoQuality = isAuto || a.peekWord("quality") == "auto"
        if autoQuality {
            guard hasQuality else { throw refuse("quality=auto", "quality=auto only with jpeg, webp, avif or jxl") }
            if a.peekWord("quality") == "auto" {
                _ = a.take("quality")
            } else if named.contains("quality") {
                throw refuse("a fixed quality", "quality=auto or none with format(auto): it chooses the quality")
            }
            quality = 100
            minScore = try a.number("min_score", default: Self.defaultMinScore, range: Self.minScoreRange)
        } else {
            guard !named.contains("min_score") else { throw refuse("min_score", "min_score only with quality=auto or format(auto)") }
            quality = lossless ? 100 : Int(try a.number("quality", default: 85, range: 1...100).rounded())
        }
        if isAuto {
            formats = try a.choices("formats", allowed: Self.autoFormats, default: Self.defaultAutoFormats)
        } else {
            guard !named.contains("formats") else { throw refuse("formats", "formats only with format(auto)") }
            formats = format.map { [$0] } ?? []
        }
        progressive = try a.bool("progressive", default: false)
        if named.contains("keep_metadata") {
            guard lossless else { throw refuse("keep_metadata", "keep_metadata only with jxl and lossless=true") }
            keepMetadata = try a.bool("keep_metadata", default: false)
        }
        if named.contains("effort") {
            guard format == .jxl || (isAuto && formats.contains(.jxl)) else { throw refuse("effort", "effort only with jxl") }
            effort = Int(try a.number("effort", range: Double(Self.effortRange.lowerBound)...Double(Self.effortRange.upperBound)).rounded())
        }
        if named.contains("compression") {
            guard format == .png else { throw refuse("compression", "compression only with png") }
            compression = Int(try a.number("compression", range: 0...9).rounded())
        }
        let hasLimit = named.contains("max_bytes"), hasFloor = named.contains("min_quality")
        if hasLimit || hasFloor {
            guard hasQuality, hasLimit || autoQuality else {
                throw refuse(
                    hasLimit ? "max_bytes" : "min_quality",
                    hasLimit
                        ? "max_bytes only with a format that has a quality (jpeg, webp, avif, jxl)"
                        : "min_quality only with max_bytes or quality=auto")
            }
            if hasLimit { maxBytes = Int(try a.number("max_bytes", range: 100...100_000_000).rounded()) }
            // Never above the quality itself: `format(jpeg, quality=5, max_bytes=…)` searches 5 down
            // to 5, and its identifier (`min_quality=5`) parses (found by `scripts/fuzz chain`).
            minQuality = Int(try a.number("min_quality", default: Double(min(10, quality)), range: 1...Double(quality)).rounded())
        }
        try a.finish()
    }

    public var identifier: String {
        var parts = [format?.rawValue ?? "auto"]
        if let minScore {
            if format != nil { parts.append("quality=auto") }
            parts.append("min_score=\(formatNumber(minScore))")
            if format == nil { parts.append("formats=\(formats.map(\.rawValue).joined(separator: "|"))") }
        } else if lossless {
            parts.append("lossless=true")
            if keepMetadata { parts.append("keep_metadata=true") }
        } else if format?.hasQuality == true {
            parts.append("quality=\(quality)")
        }
        if format == .jxl || (format == nil && formats.contains(.jxl)) { parts.append("effort=\(effort)") }
        if format?.canBeProgressive ?? true { parts.append("progressive=\(progressive)") }
        if compression != Self.defaultCompression { parts.append("compression=\(compression)") }
        if let maxBytes {
            parts += ["max_bytes=\(maxBytes)", "min_quality=\(minQuality)"]
        } else if minScore != nil, minQuality != 10 {
            parts.append("min_quality=\(minQuality)")
        }
        return "format(\(parts.joined(separator: ",")))"
    }
}

extension ImageFormat {
    /// Whether its encoder takes a quality (1–100): the one list of them (a `format` step's
    /// identifier names a quality only for these).
    package var hasQuality: Bool { [.jpeg, .webp, .avif, .jxl].contains(self) }
}
