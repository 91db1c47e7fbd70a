import HalcyonRuntime

/// What a worker learned about a job's source while decoding it: the `source_*` columns and
/// `source_meta` of its row. Sizes are as displayed (after the EXIF orientation is applied) and
/// at full resolution, whatever size the decoder actually produced.
public struct SourceFacts: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var format: ImageFormat
    /// The downloaded (or read) size of the source in bytes.
    public var bytes: Int
    /// EXIF orientation 1–8 (1 when the source has none).
    public var orientation: Int = 1
    public var hasAlpha: Bool = false
    /// Animation frames (TIFF pages); 1 for a still image.
    public var frames: Int = 1
    /// The embedded ICC profile's description, when the source has one.
    public var profile: String?
    /// EXIF camera make and model, when present.
    public var cameraMake: String?
    public var cameraModel: String?
    /// EXIF DateTimeOriginal (or DateTime), as `YYYY-MM-DDTHH:MM:SS` local camera time.
    public var capturedAt: String?
    /// Whether the source carried GPS data.
    public var hasGPS: Bool = false
    /// Where it was taken, when the EXIF GPS block holds a position. Recorded on a row only
    /// when the job's `options.keep_gps` is true, and never kept in the store.
    public var position: GPSPosition?

    public struct GPSPosition: Sendable, Equatable {
        public var latitude: Double
        public var longitude: Double
        public init(latitude: Double, longitude: Double) {
            self.latitude = latitude
            self.longitude = longitude
        }
    }

    public init(width: Int, height: Int, format: ImageFormat, bytes: Int) {
        self.width = width
        self.height = height
        self.format = format
        self.bytes = bytes
    }

    /// The same facts without the GPS position (`has_gps` stays).
    public var withoutPosition: SourceFacts {
        var copy = self
        copy.position = nil
        return copy
    }

    /// The `source_meta` object: the keys that apply, nothing for facts the source lacks.
    public var meta: JSONValue {
        var m: [String: JSONValue] = [
            "orientation": .number(Double(orientation)), "has_alpha": .bool(hasAlpha), "frames": .number(Double(frames)),
        ]
        // Text from the file: never a NUL, which jsonb refuses (the row's success would be lost).
        if let profile { m["profile"] = .string(profile.postgresSafe) }
        if let cameraMake { m["camera_make"] = .string(cameraMake.postgresSafe) }
        if let cameraModel { m["camera_model"] = .string(cameraModel.postgresSafe) }
        if let capturedAt { m["captured_at"] = .string(capturedAt.postgresSafe) }
        if hasGPS { m["has_gps"] = true }
        if let position { m["gps"] = ["latitude": .number(position.latitude), "longitude": .number(position.longitude)] }
        return .object(m)
    }

}

/// What a row records about its source (`source_*` columns), in the form the store's key files
/// keep for hits: the size, format and bytes, and `source_meta` as JSON text that a hit relays
/// without reading it.
public struct SourceRecord: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var format: String
    public var bytes: Int
    /// The `source_meta` object, JSON text.
    public var metaJSON: String

    public init(width: Int, height: Int, format: String, bytes: Int, metaJSON: String) {
        self.width = width
        self.height = height
        self.format = format
        self.bytes = bytes
        self.metaJSON = metaJSON
    }

    public init(_ facts: SourceFacts) {
        self.init(width: facts.width, height: facts.height, format: facts.format.rawValue, bytes: facts.bytes, metaJSON: facts.meta.jsonText)
    }
}
