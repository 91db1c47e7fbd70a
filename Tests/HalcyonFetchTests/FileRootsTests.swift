import Foundation
import HalcyonDomain
import HalcyonImage
import HalcyonRuntime
import Synchronization
import Testing

@testable import HalcyonFetch

/// `file://` sources: beneath a root by construction (the walk never leaves it), regular files
/// only, bounded in size, cancellable.
@Suite struct FileRootsTests {
    struct Tree {
        let base: URL, root: URL, outside: URL
        let image = Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 7, count: 60)
        let secret = Data("root:x:0:0".utf8)

        init() throws {
            base = FileManager.default.temporaryDirectory.appendingPathComponent("fileroots-\(UUID().uuidString.prefix(8))")
            root = base.appendingPathComponent("root")
            outside = base.appendingPathComponent("outside")
            for d in [root.appendingPathComponent("a/b"), outside] {
                try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
            }
            try image.write(to: root.appendingPathComponent("a/b/in.jpg"))
            try secret.write(to: outside.appendingPathComponent("secret"))
        }

        func link(_ name: String, to target: String) throws {
            try FileManager.default.createSymbolicLink(atPath: root.appendingPathComponent(name).path, withDestinationPath: target)
        }

        func read(_ relative: String, maxBytes: Int = 1 << 20, cancel: CancellationFlag = CancellationFlag()) throws(HalcyonError) -> Data {
            let path = relative.hasPrefix("/") ? relative : root.appendingPathComponent(relative).path
            return try FileRoots([root.path]).read(path, maxBytes: maxBytes, cancel: cancel, source: "file://" + path)
        }

        func expect(_ relative: String, _ code: ErrorCode, mentioning text: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(sourceLocation: sourceLocation) { _ = try read(relative) } throws: { error in
                guard let e = error as? HalcyonError else { return false }
                return e.code == code && (text.map { e.message.contains($0) } ?? true)
            }
        }

        func remove() { try? FileManager.default.removeItem(at: base) }
    }

    @Test func symlinksAreFollowedOnlyWhileTheyStayBeneathARoot() throws {
        let t = try Tree()
        defer { t.remove() }
        try t.link("relative.jpg", to: "a/b/in.jpg")
        try t.link("absolute.jpg", to: t.root.appendingPathComponent("a/b/in.jpg").path)
        try t.link("dir", to: "a")
        try t.link("up-and-in.jpg", to: "a/../a/b/in.jpg")
        for ok in ["a/b/in.jpg", "relative.jpg", "absolute.jpg", "dir/b/in.jpg", "up-and-in.jpg", "a/./b/../b/in.jpg"] {
            #expect(try t.read(ok) == t.image, "\(ok)")
        }
        try t.link("escape", to: t.outside.appendingPathComponent("secret").path)
        try t.link("escape-relative", to: "../outside/secret")
        try t.link("escape-dir", to: "..")
        try t.link("zero", to: "/dev/zero")
        try t.link("loop", to: "loop")
        t.expect("escape", .invalidSource, mentioning: "outside every --file-root")
        t.expect("escape-relative", .invalidSource, mentioning: "above its --file-root")
        t.expect("escape-dir/outside/secret", .invalidSource, mentioning: "above its --file-root")
        t.expect("zero", .invalidSource)
        t.expect("loop", .invalidSource, mentioning: "symlinks")
        t.expect(t.outside.appendingPathComponent("secret").path, .invalidSource, mentioning: "not beneath")
        t.expect(t.root.path + "/../outside/secret", .invalidSource, mentioning: "not beneath")
        t.expect("a/b/missing.jpg", .fileNotFound)
        t.expect("a/b/in.jpg/deeper", .fileNotFound, mentioning: "not a directory")
    }

    /// A FIFO used to hang a job (and its thread) for good; a directory or device is no image.
    @Test func onlyRegularFilesAreRead() throws {
        let t = try Tree()
        defer { t.remove() }
        let fifo = t.root.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o600) == 0)
        // On a thread of its own: a read that blocked on the FIFO (no writer ever comes) is
        // seen as one — a failure after 60 s — instead of hanging the suite.
        let done = DispatchSemaphore(value: 0)
        let read = Mutex<Result<Data, HalcyonError>?>(nil)
        Thread.detachNewThread {
            let r = Result { () throws(HalcyonError) -> Data in try t.read("pipe") }
            read.withLock { $0 = r }
            done.signal()
        }
        if done.wait(timeout: .now() + 60) == .timedOut {
            Issue.record("reading a FIFO blocked")
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)  // let the blocked read end
            if writer >= 0 { close(writer) }
            done.wait()
        }
        switch read.withLock({ $0 }) {
        case .failure(let e)?: #expect(e.code == .invalidSource && e.message.contains("a FIFO"), "\(e)")
        case .success?: Issue.record("a FIFO was read as a source")
        case nil: Issue.record("no result")
        }
        t.expect("a", .invalidSource, mentioning: "a directory")
    }

    /// A 20 GB sparse file used to be read whole; the size is judged before reading.
    @Test func aFileOverTheLimitIsRefusedFromItsSize() throws {
        let t = try Tree()
        defer { t.remove() }
        let sparse = t.root.appendingPathComponent("sparse.jpg")
        #expect(FileManager.default.createFile(atPath: sparse.path, contents: t.image))
        #expect(truncate(sparse.path, 20 << 30) == 0)
        // Judged from fstat's size (the message has it), not by reading up to the limit, which
        // would say the file grew over it.
        #expect { _ = try t.read("sparse.jpg", maxBytes: 50 << 20) } throws: {
            ($0 as? HalcyonError)?.code == .tooLarge && "\($0)".contains("is \(20 << 30) bytes, over the \(50 << 20)-byte limit")
        }
        #expect { _ = try t.read("a/b/in.jpg", maxBytes: 10) } throws: { ($0 as? HalcyonError)?.code == .tooLarge }
        #expect {
            _ = try t.read(
                "a/b/in.jpg",
                cancel: {
                    let f = CancellationFlag(); f.cancel(); return f
                }())
        } throws: {
            "\($0)" == "\(HalcyonError.abandoned)"
        }
    }

    /// The root may be named through a symlink, and a job may spell the path either way.
    @Test func aRootIsKnownByItsNameAndItsRealPath() throws {
        let t = try Tree()
        defer { t.remove() }
        let alias = t.base.appendingPathComponent("alias")
        try FileManager.default.createSymbolicLink(at: alias, withDestinationURL: t.root)
        let roots = FileRoots([alias.path])
        for path in [alias.path + "/a/b/in.jpg", t.root.path + "/a/b/in.jpg"] {
            #expect(try roots.read(path, maxBytes: 1 << 20, cancel: CancellationFlag(), source: path) == t.image)
        }
    }

    /// A symlink swapped between a file inside and one outside while jobs read it: with a check
    /// and then an open by name, a read could land outside; walking by descriptors it cannot.
    @Test func aSymlinkSwappedDuringReadsNeverLeadsOutside() throws {
        let t = try Tree()
        defer { t.remove() }
        let inside = t.root.appendingPathComponent("a/b/in.jpg").path, outside = t.outside.appendingPathComponent("secret").path
        let flip = t.root.appendingPathComponent("flip").path, staging = t.root.appendingPathComponent(".staging").path
        try FileManager.default.createSymbolicLink(atPath: flip, withDestinationPath: inside)
        let stop = Atomic<Bool>(false)
        let swapper = Thread {
            var toOutside = true
            while !stop.load(ordering: .relaxed) {
                unlink(staging)
                symlink(toOutside ? outside : inside, staging)
                rename(staging, flip)
                toOutside.toggle()
            }
        }
        swapper.start()
        defer { stop.store(true, ordering: .relaxed) }
        var read = 0, refused = 0
        for _ in 0..<3000 {
            do {
                let data = try t.read("flip")
                #expect(data == t.image, "a read returned the file outside the root")
                read += 1
            } catch {
                #expect(error.code == .invalidSource || error.code == .fileNotFound, "\(error)")
                refused += 1
            }
        }
        #expect(read > 0 && refused > 0, "the swap raced: \(read) read, \(refused) refused")
    }
}

@Suite struct DataSourceTests {
    /// Percent-encoded payloads are bytes, not text: a binary one used to fail as invalid UTF-8.
    @Test func aPercentEncodedBinaryPayloadDecodes() throws {
        let bytes: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x80, 0xFE]
        let encoded = bytes.map { String(format: "%%%02X", $0) }.joined()
        #expect(try Source.parse("data:image/jpeg," + encoded) == .data(mediaType: "image/jpeg", bytes: Data(bytes)))
        #expect(try Source.parse("data:image/jpeg,ab%2fc") == .data(mediaType: "image/jpeg", bytes: Data("ab/c".utf8)))
        #expect { _ = try Source.parse("data:image/jpeg,%G1") } throws: { ($0 as? HalcyonError)?.code == .invalidSource }
        #expect { _ = try Source.parse("data:image/jpeg,%F") } throws: { ($0 as? HalcyonError)?.code == .invalidSource }
    }

    /// `data:` sources are capped at 10 MiB, whatever the download limit (it used to be 50 MiB
    /// in the worker and 10 MiB in `enqueue`).
    @Test func dataSourcesAreCappedAtTenMiB() throws {
        var c = FetchConfiguration()
        #expect(c.maxBytes == 50 << 20 && c.maxDataBytes == 10 << 20)
        c.maxBytes = 1 << 20
        #expect(c.maxDataBytes == 1 << 20)
        let eleven = "data:image/png;base64," + Data(count: 11 << 20).base64EncodedString()
        #expect { _ = try Source.parse(eleven, maxDataBytes: FetchConfiguration().maxDataBytes) } throws: { ($0 as? HalcyonError)?.code == .tooLarge }
        #expect { _ = try Source.parse(eleven) } throws: { ($0 as? HalcyonError)?.code == .tooLarge }
    }
}
