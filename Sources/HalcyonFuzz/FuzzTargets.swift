import Foundation

/// One fuzz target: its name (`scripts/fuzz NAME`, `Tests/Fixtures/fuzz/NAME/`, the executable
/// `Fuzz<Name>`) and its entry, which must return for every input — a crash, a trap or a
/// failed `precondition` is what libFuzzer reports. Entries only read their input: no files,
/// no network, no database, no ImageMagick.
public struct FuzzTarget: Sendable {
    public let name: String
    /// What it exercises, one line.
    public let summary: String
    public let run: @Sendable (Data) -> Void
}

/// Every fuzz target, in the order `scripts/fuzz --list` shows them (which reads the lines below:
/// keep each on one line).
public enum FuzzTargets {
    public static let all: [FuzzTarget] = [
        FuzzTarget(name: "chain", summary: "processor-chain grammar, presets, canonical identifiers, size planning", run: ChainFuzz.run),
        FuzzTarget(name: "options", summary: "a job's options JSON (JSONText, JobOptions, expirations, retry strategies)", run: OptionsFuzz.run),
        FuzzTarget(name: "source", summary: "source strings: http(s), file and data: URLs, fetch requests, CIDRs", run: SourceFuzz.run),
        FuzzTarget(name: "header", summary: "declared sizes from image headers, the byte checks, the plan before a decode", run: HeaderFuzz.run),
        FuzzTarget(name: "exif", summary: "EXIF blocks in JPEG, PNG, WebP or alone, and the source_meta they make", run: ExifFuzz.run),
        FuzzTarget(name: "direct", summary: "the direct JPEG/PNG lane: libjpeg/libpng shims, resize, JPEG and PNG writers", run: DirectFuzz.run),
    ]

    /// The target called `name`.
    public static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// What the `Fuzz<Name>` executables share.
public enum FuzzEntry {
    /// libFuzzer's `LLVMFuzzerTestOneInput`: runs `run` on a copy of the input; always 0.
    public static func test(_ data: UnsafePointer<UInt8>, _ size: Int, _ run: (Data) -> Void) -> CInt {
        run(Data(bytes: data, count: size))
        return 0
    }

    /// The `main` of an executable built without `-sanitize=fuzzer`: `replay`, then exit with its status.
    public static func main(_ target: String) -> Never {
        exit(replay(target))
    }

    /// An executable built without `-sanitize=fuzzer`: runs `target` once on every file named in
    /// `arguments` (every file beneath a directory), printing each; exit status 0 when all
    /// returned (a crash ends the process), 2 for a path that cannot be read.
    public static func replay(_ target: String, arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> Int32 {
        guard let fuzz = FuzzTargets.named(target) else { return 2 }
        guard !arguments.isEmpty, !arguments.contains("--help"), !arguments.contains("-h") else {
            print("usage: Fuzz\(target.prefix(1).uppercased() + target.dropFirst()) FILE|DIR…  (\(fuzz.summary))")
            print("Runs each input once (a build without -sanitize=fuzzer); scripts/fuzz \(target) fuzzes it.")
            return arguments.isEmpty ? 2 : 0
        }
        var status: Int32 = 0
        for path in arguments {
            let files = inputs(path)
            if files.isEmpty { status = 2 }
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else {
                    print("cannot read \(file)")
                    status = 2
                    continue
                }
                fuzz.run(data)
                print("ok \(file) (\(data.count) bytes)")
            }
        }
        return status
    }

    /// `path` if it is a file, else the regular files beneath it (sorted; hidden ones left out).
    public static func inputs(_ path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let base = URL(fileURLWithPath: path)
        let names = FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? []
        return names.filter { !$0.split(separator: "/").contains { $0.hasPrefix(".") } }.sorted().compactMap { name in
            let file = base.appendingPathComponent(name).path
            var dir: ObjCBool = false
            return FileManager.default.fileExists(atPath: file, isDirectory: &dir) && !dir.boolValue ? file : nil
        }
    }
}
