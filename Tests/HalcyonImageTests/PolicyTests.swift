internal import CMagickWand
import Foundation
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// The shipped policy.xml is what ImageMagick runs under.
@Suite(.cpuHeavy) struct MagickPolicyTests {
    @Test func theShippedPolicyIsLoaded() throws {
        let dir = try #require(MagickImage.policyDirectory)
        #expect(dir.hasSuffix("/policy"))
        #expect(FileManager.default.fileExists(atPath: dir + "/policy.xml"))
        #expect(MagickGetResourceLimit(ThreadResource) == 1)
        #expect(MagickGetResourceLimit(MemoryResource) == 1 << 30)  // above Debian's 256 MiB cap
        // The policy's width and height are the grammar's and the pixel budget's: 16384, not
        // "16KP" (which ImageMagick reads as 16,000).
        #expect(MagickGetResourceLimit(WidthResource) == UInt64(ImageLimits().maxWidth))
        #expect(MagickGetResourceLimit(HeightResource) == UInt64(ImageLimits().maxHeight))
        #expect(ImageLimits().maxWidth == 16384)
    }

    @Test(arguments: [
        ("SVG", "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><rect width='10' height='10'/></svg>"),
        ("MVG", "push graphic-context\nviewbox 0 0 10 10\nfill red\nrectangle 0,0 10,10\npop graphic-context\n"),
        ("MSL", "<?xml version='1.0'?><image><read filename='/etc/hostname'/></image>"),
        ("TEXT", "hello"),
        ("PS", "%!PS\n0 0 moveto showpage\n"),
    ])
    func dangerousCodersAreRefusedEvenWhenAskedForByName(coder: String, payload: String) {
        _ = MagickImage.policyDirectory  // genesis with the policy
        let wand = NewMagickWand()!
        defer { DestroyMagickWand(wand) }
        MagickSetFormat(wand, coder)
        let data = Array(payload.utf8)
        let ok = data.withUnsafeBytes { MagickReadImageBlob(wand, $0.baseAddress, $0.count) }
        #expect(ok == MagickFalse, "\(coder) was decoded")
    }
}
