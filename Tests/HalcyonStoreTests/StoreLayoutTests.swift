import HalcyonRuntime
import HalcyonStore
import Testing

/// The layout both stores share, spelled in `StoreLayout` alone: pinned here as it is on disks
/// and in buckets already written.
@Suite struct StoreLayoutTests {
    let digest = Digest.sha256Hex("hello image")

    @Test func eachAreaHasItsDirectoryAndFanOut() {
        #expect(StoreLayout.Area.allCases.map(\.directory) == ["objects", "keys", "originals"])
        #expect(StoreLayout.Area.allCases.map(\.prefix) == ["objects/", "keys/", "originals/"])
        #expect(StoreLayout.Area.allCases.map(\.depth) == [3, 2, 2])
        #expect(StoreLayout.tmpDirectory == "tmp")
    }

    @Test func pathsFanOutByTheDigest() {
        let d = Array(digest)
        #expect(StoreLayout.objectPath(digest: digest, ext: "webp") == "objects/\(String(d[0..<2]))/\(String(d[2..<4]))/\(digest).webp")
        let key = Digest.sha256Hex("k@resize(10)")
        #expect(StoreLayout.keyPath(for: "k@resize(10)") == "keys/\(key.prefix(2))/\(key)")
        let url = Digest.sha256Hex("https://example.com/a.jpg")
        #expect(StoreLayout.originalPath(for: "https://example.com/a.jpg") == "originals/\(url.prefix(2))/\(url)")
    }

    @Test func anObjectsPathNamesItsDigest() {
        let path = StoreLayout.objectPath(digest: digest, ext: "jpg")
        #expect(StoreLayout.digest(ofObjectPath: path) == digest)
        #expect(StoreLayout.digest(ofObjectPath: "/srv/store/" + path) == digest)
        #expect(StoreLayout.digest(ofObjectPath: "\(digest).png") == digest)
        #expect(StoreLayout.isObjectPath(path))
        #expect(!StoreLayout.isObjectPath(StoreLayout.keyPath(for: "k")))
        #expect(!StoreLayout.isObjectPath("objects/../keys/ab/x"))
    }
}
