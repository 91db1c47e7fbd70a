/// `blur(R)` — Kingfisher's `BlurImageProcessor`: Gaussian blur with sigma R (0.1–100 px).
public struct BlurStep: RadiusStep {
    public static let name = "blur"
    public var radius: Double
    init(radius: Double) { self.radius = radius }
}

/// `sharpen(R)` — unsharp with sigma R (0.1–100 px).
public struct SharpenStep: RadiusStep {
    public static let name = "sharpen"
    public var radius: Double
    init(radius: Double) { self.radius = radius }
}

/// `overlay(COLOR, fraction=0.5)` — Kingfisher's `OverlayImageProcessor`: paints COLOR over
/// the image; `fraction` is how much of the image shows through (1 = unchanged, 0 = all colour).
public struct OverlayStep: ChainStepDefinition {
    public static let name = "overlay"
    public var color: Color
    public var fraction: Double
    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["color", "fraction"])
        color = try a.color("color")
        fraction = try a.number("fraction", default: 0.5, range: 0...1)
        try a.finish()
    }
    public var identifier: String { "overlay(\(color),fraction=\(formatNumber(fraction)))" }
}

/// `tint(COLOR)` — Kingfisher's `TintImageProcessor`: paints COLOR over the image with the
/// colour's own alpha (`#ff000080` tints half-way to red).
public struct TintStep: ChainStepDefinition {
    public static let name = "tint"
    public var color: Color
    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["color"])
        color = try a.color("color")
        try a.finish()
    }
    public var identifier: String { "tint(\(color))" }
}

/// `color_controls(brightness=0, contrast=1, saturation=1)` — Kingfisher's
/// `ColorControlsProcessor`: brightness is added (−1…1), contrast and saturation multiply (0…4).
public struct ColorControlsStep: ChainStepDefinition {
    public static let name = "color_controls"
    public var brightness: Double
    public var contrast: Double
    public var saturation: Double
    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["brightness", "contrast", "saturation"])
        brightness = try a.number("brightness", default: 0, range: -1...1)
        contrast = try a.number("contrast", default: 1, range: 0...4)
        saturation = try a.number("saturation", default: 1, range: 0...4)
        try a.finish()
    }
    public var identifier: String {
        "color_controls(brightness=\(formatNumber(brightness)),contrast=\(formatNumber(contrast)),saturation=\(formatNumber(saturation)))"
    }
}

/// `black_white` — Kingfisher's `BlackWhiteProcessor`: greyscale (R = G = B), still sRGB.
public struct BlackWhiteStep: PlainStep {
    public static let name = "black_white"
    init() {}
}

/// `round_corner(R, corners=all, background=none)` — Kingfisher's `RoundCornerImageProcessor`:
/// cuts the chosen corners (`all`, `top`, `bottom`, `left`, `right`, `top_left`, `top_right`,
/// `bottom_left`, `bottom_right`) to radius R px — or, written `R%`, R per cent of the image's
/// width (Kingfisher's `widthFraction`); outside is transparent, or `background`.
public struct RoundCornerStep: ChainStepDefinition {
    public enum Corners: String, Sendable, CaseIterable {
        case all, top, bottom, left, right, top_left, top_right, bottom_left, bottom_right
    }
    public static let name = "round_corner"
    public var radius: Double
    /// `radius` is a percentage of the width.
    public var radiusIsPercent = false
    public var corners: Corners
    public var background: Color?

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["radius", "corners", "background"])
        (radius, radiusIsPercent) = try a.length("radius", pixels: 0...16384, percent: 0...100)
        corners = try a.choice("corners", default: Corners.all)
        background = try a.optionalColor("background")
        try a.finish()
    }

    public var identifier: String {
        "round_corner(\(formatNumber(radius))\(radiusIsPercent ? "%" : ""),corners=\(corners.rawValue),background=\(background.map(\.description) ?? "none"))"
    }
}

/// `blend(mode=normal, alpha=1, background=none)` — Kingfisher's `BlendImageProcessor`: draws
/// the image with a blend mode and opacity over a background colour (or transparency).
public struct BlendStep: ChainStepDefinition {
    /// The blend modes, by the names a chain writes them.
    public enum Mode: String, Sendable, CaseIterable {
        case normal, multiply, screen, overlay, darken, lighten, color_dodge, color_burn, soft_light, hard_light,
            difference, exclusion, hue, saturation, color, luminosity
    }
    public static let name = "blend"
    public var mode: Mode
    public var alpha: Double
    public var background: Color?

    public init(step: ChainStep) throws(ChainError) {
        var a = try StepArguments(step, keys: ["mode", "alpha", "background"])
        mode = try a.choice("mode", default: Mode.normal)
        alpha = try a.number("alpha", default: 1, range: 0...1)
        background = try a.optionalColor("background")
        try a.finish()
    }

    public var identifier: String {
        "blend(mode=\(mode.rawValue),alpha=\(formatNumber(alpha)),background=\(background.map(\.description) ?? "none"))"
    }
}
