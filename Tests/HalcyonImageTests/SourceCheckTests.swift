import Foundation
import HalcyonChain
import HalcyonDomain
import HalcyonRuntime
import HalcyonSamples
import HalcyonTestSupport
import Testing

@testable import HalcyonImage

/// What is refused before a coder runs, and how ImageMagick's words are passed on.
@Suite struct SourceCheckTests {
    @Test func aTwelveBitJPEGIsUnsupportedNotAnEmptyImage() throws {
        let data = try Data(contentsOf: publicFixture("libjpeg-turbo/monkey12.jpg"))
        #expect(DeclaredSize.jpegPrecision(data) == 12)
        #expect(DeclaredSize.jpegPrecision(try SampleImages.photo(width: 8, height: 8, seed: 1)) == 8)
        #expect {
            try ImagePipeline.run(data, format: .jpeg, chains: [try ProcessorChain.parse("resize(64x64, mode=fill)")])
        } throws: {
            ($0 as? HalcyonError)?.code == .unsupportedFormat && ($0 as? HalcyonError)?.message == "12-bit JPEG: only 8-bit JPEGs are decoded"
        }
        #expect {
            try WatermarkSource.check(data, format: .jpeg)
        } throws: { ($0 as? HalcyonError)?.code == .unsupportedFormat }
    }

    @Test func imagesOfNoPixelsAreRefusedFromTheirHeaders() {
        var header = MagickImage.Header(width: 0, height: 0, frames: 1, swapsAxes: false)
        #expect { try ImageLimits().check(header) } throws: { ($0 as? HalcyonError)?.code == .decodeFailed }
        header = MagickImage.Header(
            width: 10, height: 10, frames: 2, swapsAxes: false, frameSizes: [ImageSize(width: 10, height: 10), ImageSize(width: 5, height: 0)])
        #expect { try ImageLimits().check(header) } throws: { ($0 as? HalcyonError)?.message.contains("frame 2 has no pixels") == true }
    }

    @Test func imageMagicksReasonLosesItsSourceFileTail() {
        #expect(MagickImage.reasonText("negative or zero image size `' @ error/gif.c/ReadGIFImage/1302") == "negative or zero image size")
        #expect(MagickImage.reasonText("insufficient image data in file `' @ error/png.c/ReadPNGImage/4200") == "insufficient image data in file")
        #expect(MagickImage.reasonText("improper image header `photo.jpg' @ error/jpeg.c/ReadJPEGImage/1111") == "improper image header")
        #expect(MagickImage.reasonText("plain words") == "plain words")
        #expect(MagickImage.reasonText("") == "")
    }

    @Test func theLibrarysOwnWordsGoInTheEntrysDetail() {
        let e = HalcyonError(
            .decodeFailed, "cannot read the gif header: negative or zero image size",
            detail: "negative or zero image size `' @ error/gif.c/ReadGIFImage/1302")
        #expect(e.errorEntry["detail"]?.stringValue == "negative or zero image size `' @ error/gif.c/ReadGIFImage/1302")
        #expect(e.description == "image.decode_failed: cannot read the gif header: negative or zero image size")
    }
}
