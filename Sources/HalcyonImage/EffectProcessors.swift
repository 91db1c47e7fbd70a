internal import CMagickWand
import HalcyonChain
import HalcyonDomain

extension BlurStep: RadiusProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.blur(sigma: radius) }
}

extension SharpenStep: RadiusProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.sharpen(sigma: radius) }
}

extension OverlayStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) { try image.colorize(color, opacity: 1 - fraction) }
}

extension TintStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        try image.colorize(Color(red: color.red, green: color.green, blue: color.blue), opacity: Double(color.alpha) / 255)
    }
}

extension ColorControlsStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        try image.colorControls(brightness: brightness, contrast: contrast, saturation: saturation)
    }
}

extension BlackWhiteStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        try image.colorControls(brightness: 0, contrast: 1, saturation: 0)
    }
}

extension RoundCornerStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        let c = corners
        try image.roundCorners(
            radius: radiusIsPercent ? radius / 100 * Double(image.width) : radius,
            topLeft: [.all, .top, .left, .top_left].contains(c), topRight: [.all, .top, .right, .top_right].contains(c),
            bottomLeft: [.all, .bottom, .left, .bottom_left].contains(c), bottomRight: [.all, .bottom, .right, .bottom_right].contains(c))
        if let background { try image.blend(OverCompositeOp, alpha: 1, background: background) }
    }
}

extension BlendStep: ImageProcessor {
    public func process(_ image: MagickImage) throws(HalcyonError) {
        try image.blend(mode.op, alpha: alpha, background: background)
    }
}

extension BlendStep.Mode {
    /// ImageMagick's compositing operator for the mode.
    var op: CompositeOperator {
        switch self {
        case .normal: OverCompositeOp
        case .multiply: MultiplyCompositeOp
        case .screen: ScreenCompositeOp
        case .overlay: OverlayCompositeOp
        case .darken: DarkenCompositeOp
        case .lighten: LightenCompositeOp
        case .color_dodge: ColorDodgeCompositeOp
        case .color_burn: ColorBurnCompositeOp
        case .soft_light: SoftLightCompositeOp
        case .hard_light: HardLightCompositeOp
        case .difference: DifferenceCompositeOp
        case .exclusion: ExclusionCompositeOp
        case .hue: HueCompositeOp
        case .saturation: SaturateCompositeOp
        case .color: ColorizeCompositeOp
        case .luminosity: LuminizeCompositeOp
        }
    }
}
