import HalcyonRuntime

/// One image of a picture set: a width in one format, as stored.
public struct PictureRung: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var format: ImageFormat
    public var bytes: Int
    /// SSIMULACRA2 of the stored bytes against the rung's own pixels; nil when too small to score.
    public var score: Double?
    /// The encoder quality it was written with.
    public var quality: Int?
    /// Where it is in the store, as `result_path` is: `objects/ab/cd/<sha256>.<ext>`.
    public var path: String

    public init(width: Int, height: Int, format: ImageFormat, bytes: Int, score: Double?, quality: Int?, path: String) {
        self.width = width
        self.height = height
        self.format = format
        self.bytes = bytes
        self.score = score
        self.quality = quality
        self.path = path
    }
}

/// How a job's `<picture>` is written (the job's `picture` option): nothing in it changes an
/// image, so it is no part of the result key — a set stored once serves every page's markup.
public struct PictureOptions: Sendable, Equatable {
    /// The `sizes` attribute: how wide the image is drawn at each viewport. Default `100vw`.
    public var sizes = "100vw"
    /// Put before each rung's store path in the markup (e.g. `https://cdn.example.com/`). Default
    /// empty: the paths as they are, relative to the store's root.
    public var baseURL = ""
    /// The `<img>`'s `alt` text. Default empty.
    public var alt = ""
    /// `lazy` (default): the browser loads the image when it nears the viewport; `eager` for an
    /// image at the top of the page (its largest content), which also asks for it first
    /// (`fetchpriority="high"`).
    public var loading = Loading.lazy
    public enum Loading: String, Sendable { case lazy, eager }

    public init() {}

    /// Longest value of each field, in bytes; `base_url`, repeated for every rung twice, 512.
    public static let maxFieldBytes = 1024
    public static let maxBaseURLBytes = 512

    /// The characters a `base_url` may hold: a URL's, without those a srcset or an attribute
    /// would have to escape or would split on (`,`, space, quotes, `<`, `>`, `&`).
    static let baseURLCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$()*+;=%".unicodeScalars)

    /// Control characters (C0, DEL, C1) and the bidirectional overrides and isolates, which
    /// could reorder what a terminal or a page shows.
    static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || (0x202A...0x202E).contains(scalar.value)
            || (0x2066...0x2069).contains(scalar.value)
    }

    /// `{"sizes": "…", "base_url": "…", "alt": "…", "loading": "lazy|eager"}` (each optional);
    /// `job.invalid_options` naming the field otherwise.
    public static func parse(_ value: JSONValue) throws(HalcyonError) -> PictureOptions {
        guard case .object(let fields) = value else {
            throw HalcyonError(.invalidOptions, "option 'picture' must be an object with sizes, base_url, alt and loading (strings)")
        }
        var options = PictureOptions()
        for key in fields.keys.sorted() {
            guard let text = fields[key]?.stringValue else {
                throw HalcyonError(.invalidOptions, "picture.\(key) must be a string")
            }
            guard text.utf8.count <= maxFieldBytes, !text.unicodeScalars.contains(where: isRefused) else {
                throw HalcyonError(
                    .invalidOptions, "picture.\(key) must be at most \(maxFieldBytes) bytes, without control characters or bidirectional overrides")
            }
            switch key {
            case "sizes":
                guard !text.trimmingWhitespace.isEmpty else { throw HalcyonError(.invalidOptions, "picture.sizes must not be empty") }
                options.sizes = text
            case "base_url":
                // A srcset candidate ends at whitespace and a list at a comma; nothing to escape.
                guard text.utf8.count <= maxBaseURLBytes, text.unicodeScalars.allSatisfy(baseURLCharacters.contains) else {
                    throw HalcyonError(
                        .invalidOptions,
                        "picture.base_url must be at most \(maxBaseURLBytes) bytes of URL characters, without commas, spaces, quotes, <, > or & (srcset could not hold it)"
                    )
                }
                options.baseURL = text
            case "alt": options.alt = text
            case "loading":
                guard let loading = Loading(rawValue: text) else { throw HalcyonError(.invalidOptions, "picture.loading must be lazy or eager") }
                options.loading = loading
            default: throw HalcyonError(.invalidOptions, "unknown key 'picture.\(key)' (known: alt, base_url, loading, sizes)")
            }
        }
        return options
    }
}

/// A picture set's rungs (`result_manifest`), and the markup a page uses them with: an `srcset`
/// per format and a `<picture>` element.
public struct PictureManifest: Sendable, Equatable {
    /// By format in the set's order (the `<picture>`'s), widths strictly increasing within each.
    public var rungs: [PictureRung]

    public init(rungs: [PictureRung]) { self.rungs = rungs }

    /// Most rungs a manifest holds: 20 widths in each of four formats.
    public static let maxRungs = 80

    /// The formats, in the set's order.
    public var formats: [ImageFormat] {
        var seen: Set<ImageFormat> = []
        return rungs.map(\.format).filter { seen.insert($0).inserted }
    }

    /// The rungs of `format`, narrowest first.
    public func rungs(_ format: ImageFormat) -> [PictureRung] { rungs.filter { $0.format == format } }

    /// The format of the `<img>`: the last.
    public var fallback: ImageFormat? { rungs.last?.format }

    /// `URL 320w, URL 640w, …` for `format`.
    public func srcset(_ format: ImageFormat, baseURL: String = "") -> String {
        rungs(format).map { "\(baseURL)\($0.path) \($0.width)w" }.joined(separator: ", ")
    }

    /// The `<picture>`: a `<source>` per format but the last, whose largest rung is the `<img>`'s
    /// `src` (with its own `srcset`), `width` and `height` from that rung so the page does not
    /// shift while it loads.
    public func picture(_ options: PictureOptions = PictureOptions()) -> String {
        guard let fallback, let largest = rungs(fallback).last else { return "" }
        let sizes = Self.escaped(options.sizes)
        var html = "<picture>"
        for format in formats.dropLast() {
            html += "<source type=\"\(format.mediaType)\" srcset=\"\(Self.escaped(srcset(format, baseURL: options.baseURL)))\" sizes=\"\(sizes)\">"
        }
        html += "<img src=\"\(Self.escaped(options.baseURL + largest.path))\" srcset=\"\(Self.escaped(srcset(fallback, baseURL: options.baseURL)))\""
        html += " sizes=\"\(sizes)\" width=\"\(largest.width)\" height=\"\(largest.height)\" alt=\"\(Self.escaped(options.alt))\""
        html += options.loading == .lazy ? " loading=\"lazy\" decoding=\"async\"></picture>" : " loading=\"eager\" fetchpriority=\"high\"></picture>"
        return html
    }

    /// Text for an HTML attribute value in double quotes.
    static func escaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(c)
            }
        }
        return out
    }

    /// `{"rungs": […]}`: what a store key records.
    public var storedJSON: String { JSONValue.object(["rungs": .array(rungs.map(\.json))]).jsonText }

    /// The row's `result_manifest`: the rungs, an `srcset` per format, the `<picture>` and the
    /// `sizes` it was written with.
    public func rowJSON(_ options: PictureOptions) -> String {
        var srcsets: [String: JSONValue] = [:]
        for format in formats { srcsets[format.rawValue] = .string(srcset(format, baseURL: options.baseURL)) }
        return JSONValue.object([
            "rungs": .array(rungs.map(\.json)), "srcset": .object(srcsets), "picture": .string(picture(options)),
            "sizes": .string(options.sizes),
        ]).jsonText
    }

    /// The rungs of `{"rungs": […]}` (a store key's, a row's); nil for anything else — more than
    /// `maxRungs`, a size out of range, a path that is not a store object's.
    public init?(jsonText: String) {
        guard jsonText.utf8.count <= 262_144, let value = JSONValue.parse(jsonText), let list = value["rungs"]?.arrayValue,
            !list.isEmpty, list.count <= Self.maxRungs
        else { return nil }
        var rungs: [PictureRung] = []
        for item in list {
            guard let width = item["width"]?.numberValue.flatMap(Self.dimension), let height = item["height"]?.numberValue.flatMap(Self.dimension),
                let format = item["format"]?.stringValue.flatMap(ImageFormat.init(rawValue:)),
                let bytes = item["bytes"]?.numberValue, bytes >= 1, bytes <= 1e12, bytes == bytes.rounded(),
                let path = item["path"]?.stringValue, Self.isObjectPath(path)
            else { return nil }
            let score = item["score"]?.numberValue.flatMap { (0...100).contains($0) ? $0 : nil }
            let quality = item["quality"]?.numberValue.flatMap { (1...100).contains($0) && $0 == $0.rounded() ? Int($0) : nil }
            rungs.append(PictureRung(width: width, height: height, format: format, bytes: Int(bytes), score: score, quality: quality, path: path))
        }
        self.rungs = rungs
    }

    private static func dimension(_ n: Double) -> Int? { n >= 1 && n <= 65_535 && n == n.rounded() ? Int(n) : nil }

    /// A store object's path exactly: `objects/ab/cd/<64 lowercase hex, starting abcd>.<ext>`,
    /// the extension 1–4 lowercase letters — nothing that could break out of an attribute or a
    /// srcset, or name another file.
    static func isObjectPath(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "objects" else { return false }
        let file = parts[3].split(separator: ".", omittingEmptySubsequences: false)
        guard file.count == 2, file[0].utf8.count == 64, (1...4).contains(file[1].utf8.count),
            file[0].utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
            file[1].utf8.allSatisfy({ $0 >= 0x61 && $0 <= 0x7A })
        else { return false }
        return parts[1] == file[0].prefix(2) && parts[2] == file[0].dropFirst(2).prefix(2)
    }
}

extension PictureRung {
    var json: JSONValue {
        .object([
            "width": .number(Double(width)), "height": .number(Double(height)), "format": .string(format.rawValue),
            "bytes": .number(Double(bytes)), "score": score.map { .number(($0 * 100).rounded() / 100) } ?? .null,
            "quality": quality.map { .number(Double($0)) } ?? .null, "path": .string(path),
        ])
    }
}

extension ImageFormat {
    /// The media type a page's `<source type>` names.
    public var mediaType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .tiff: "image/tiff"
        default: "image/\(rawValue)"
        }
    }
}

extension String {
    fileprivate var trimmingWhitespace: Substring {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map(index(after:)) ?? start
        return self[start..<max(start, end)]
    }
}
