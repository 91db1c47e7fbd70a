extension Int {
    /// `value` rounded toward zero and clamped to `Int`'s range; 0 for NaN. For numbers that come
    /// from input — an image header, a job row, an option — where `Int(_:)` would trap on NaN,
    /// an infinity or a value past `Int`'s range.
    public init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9_223_372_036_854_775_807.0 {
            self = .max
        } else if value <= -9_223_372_036_854_775_808.0 {
            self = .min
        } else {
            self = Int(value)
        }
    }
}
