/// What a result records about its encoding besides its size: the encoder's quality
/// (`result_quality`) and its perceptual score (`result_score`, SSIMULACRA2). The bounds both are
/// held to wherever they are written or read back — a row, a store's key record —, so that a
/// value from outside (a garbled record, a row written by hand) is bounded, never trusted.
public enum ResultMeasures {
    /// Encoder qualities.
    public static let qualities = 1...100
    /// Perceptual scores.
    public static let scores = 0.0...100.0

    /// `quality` when it is one (1–100), else nil.
    public static func quality(_ quality: Int?) -> Int? {
        quality.flatMap { qualities.contains($0) ? $0 : nil }
    }

    /// `score` rounded to two decimals and held to 0–100; nil for NaN or an infinity.
    public static func score(_ score: Double?) -> Double? {
        guard let score, score.isFinite else { return nil }
        return (min(max(score, scores.lowerBound), scores.upperBound) * 100).rounded() / 100
    }

    /// A quality written as text (`82`); nil for anything else.
    public static func quality(text: some StringProtocol) -> Int? { quality(Int(text)) }

    /// A quality with its half step as one number (`result_quality_exact`: 82.5 for 82 and a
    /// half, a JPEG search's last step); nil when `quality` is not one, or is 100 with a half.
    public static func exactQuality(_ quality: Int?, half: Bool) -> Double? {
        guard let quality = self.quality(quality), !(half && quality == qualities.upperBound) else { return nil }
        return Double(quality) + (half ? 0.5 : 0)
    }

    /// An exact quality written as text (`82`, `82.5`; as the row and a store's key record hold
    /// it): its whole part and whether a half follows; nil for anything else.
    public static func exactQuality(text: some StringProtocol) -> (quality: Int, half: Bool)? {
        let text = String(text)
        let half = text.hasSuffix(".5")
        let whole = half ? String(text.dropLast(2)) : text.hasSuffix(".0") ? String(text.dropLast(2)) : text
        guard let quality = quality(text: whole), exactQuality(quality, half: half) != nil else { return nil }
        return (quality, half)
    }

    /// A score written as text (`87.31`); nil for anything but a finite number.
    public static func score(text: some StringProtocol) -> Double? { score(Double(String(text))) }
}
