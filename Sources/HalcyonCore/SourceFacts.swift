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
        if let profile { m["profile"] = .string(profile) }
        if let cameraMake { m["camera_make"] = .string(cameraMake) }
        if let cameraModel { m["camera_model"] = .string(cameraModel) }
        if let capturedAt { m["captured_at"] = .string(capturedAt) }
        if hasGPS { m["has_gps"] = true }
        if let position { m["gps"] = ["latitude": .number(position.latitude), "longitude": .number(position.longitude)] }
        return .object(m)
    }

    /// Everything, as the store's key files keep it (`meta` plus size, format and bytes).
    public var json: JSONValue {
        guard case .object(var m) = meta else { return meta }
        m["width"] = .number(Double(width))
        m["height"] = .number(Double(height))
        m["format"] = .string(format.rawValue)
        m["bytes"] = .number(Double(bytes))
        return .object(m)
    }

    /// Reads `json` back; nil when a required field is missing.
    public init?(json: JSONValue) {
        guard let w = json["width"]?.numberValue, let h = json["height"]?.numberValue, let f = json["format"]?.stringValue,
            let format = ImageFormat(rawValue: f), let b = json["bytes"]?.numberValue
        else { return nil }
        self.init(width: Int(w), height: Int(h), format: format, bytes: Int(b))
        orientation = json["orientation"]?.numberValue.map(Int.init) ?? 1
        hasAlpha = json["has_alpha"]?.boolValue ?? false
        frames = json["frames"]?.numberValue.map(Int.init) ?? 1
        profile = json["profile"]?.stringValue
        cameraMake = json["camera_make"]?.stringValue
        cameraModel = json["camera_model"]?.stringValue
        capturedAt = json["captured_at"]?.stringValue
        hasGPS = json["has_gps"]?.boolValue ?? false
        if let lat = json["gps"]?["latitude"]?.numberValue, let lon = json["gps"]?["longitude"]?.numberValue {
            position = GPSPosition(latitude: lat, longitude: lon)
        }
    }
}
