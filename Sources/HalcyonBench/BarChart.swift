internal import CMagickWand
import Foundation
import HalcyonDomain
import HalcyonImage

/// A horizontal bar chart drawn with MagickWand (`halcyon bench` writes one beside its JSON):
/// groups of bars, each with a median and a min–max whisker, labelled with its value.
public struct BarChart: Sendable {
    public struct Bar: Sendable {
        public var label: String, value: Double, low: Double, high: Double
        public var highlighted: Bool
        public init(label: String, value: Double, low: Double, high: Double, highlighted: Bool = false) {
            self.label = label; self.value = value; self.low = low; self.high = high; self.highlighted = highlighted
        }
    }

    public struct Group: Sendable {
        public var title: String, unit: String, bars: [Bar]
        public init(title: String, unit: String, bars: [Bar]) { self.title = title; self.unit = unit; self.bars = bars }
    }

    public var title: String
    public var groups: [Group]
    public var footer: String

    public init(title: String, groups: [Group], footer: String) { self.title = title; self.groups = groups; self.footer = footer }

    /// The chart as PNG bytes. Text uses fontconfig's DejaVu Sans (or ImageMagick's default).
    public func png(width: Int = 900) throws(HalcyonError) -> Data {
        let bar = 26, gap = 8, labelWidth = 170, right = 150, header = 44, groupHeader = 34
        let height = header + groups.reduce(0) { $0 + groupHeader + $1.bars.count * (bar + gap) + 12 } + 30
        _ = MagickImage.genesisToken
        let image = MagickImage(wand: NewMagickWand()!, format: .png)
        let background = MagickImage.pixel(named: "white")
        defer { DestroyPixelWand(background) }
        guard MagickNewImage(image.wand, width, height, background) == MagickTrue else {
            throw MagickImage.error(image.wand, .processingFailed, "chart canvas")
        }
        let draw = NewDrawingWand()!
        defer { DestroyDrawingWand(draw) }
        DrawSetFont(draw, "DejaVu-Sans")
        func text(_ s: String, x: Int, y: Int, size: Double, color: String = "#222222") {
            let p = MagickImage.pixel(named: color)
            defer { DestroyPixelWand(p) }
            DrawSetFillColor(draw, p)
            DrawSetFontSize(draw, size)
            DrawAnnotation(draw, Double(x), Double(y), Array(s.utf8) + [0])
        }
        func rect(_ x0: Double, _ y0: Double, _ x1: Double, _ y1: Double, _ color: String) {
            let p = MagickImage.pixel(named: color)
            defer { DestroyPixelWand(p) }
            DrawSetFillColor(draw, p)
            DrawRectangle(draw, x0, y0, x1, y1)
        }
        text(title, x: 12, y: 28, size: 18)
        var y = header
        let plot = Double(width - labelWidth - right)
        for group in groups {
            text("\(group.title) (\(group.unit))", x: 12, y: y + 22, size: 14, color: "#444444")
            y += groupHeader
            let scale = plot / max(group.bars.map { max($0.value, $0.high) }.max() ?? 1, 1e-9)
            for b in group.bars {
                text(b.label, x: 12, y: y + bar - 8, size: 13)
                let x0 = Double(labelWidth)
                rect(x0, Double(y), x0 + b.value * scale, Double(y + bar), b.highlighted ? "#d9682b" : "#7a8fa6")
                // The whisker: min–max over the runs.
                rect(x0 + b.low * scale, Double(y + bar / 2 - 1), x0 + b.high * scale, Double(y + bar / 2 + 1), "#222222")
                text(String(format: "%.1f", b.value), x: labelWidth + Int(max(b.value, b.high) * scale) + 8, y: y + bar - 8, size: 13)
                y += bar + gap
            }
            y += 12
        }
        text(footer, x: 12, y: height - 10, size: 11, color: "#666666")
        guard MagickDrawImage(image.wand, draw) == MagickTrue else { throw MagickImage.error(image.wand, .processingFailed, "draw chart") }
        image.outputFormat = .png
        return try image.encode()
    }
}
