import Foundation
import HalcyonDomain
import HalcyonRuntime

/// Reads `file://` sources, only beneath the configured `--file-root` directories.
///
/// The path is walked one component at a time from an open descriptor of its root
/// (`openat` with `O_NOFOLLOW`), never resolved by name and then opened: a symlink met on the
/// way is read (`readlinkat`) and followed only while its target stays beneath a root, so a
/// symlink swapped in after a check has nothing to race — there is no separate check. The file
/// must be a regular file (a FIFO, device or directory is refused without blocking: it is
/// opened `O_NONBLOCK`), no larger than the byte limit (judged from its size before reading, and
/// again while reading), and it is read in chunks that stop when the job is abandoned.
/// Blocking: call from a Dispatch thread.
public struct FileRoots: Sendable {
    struct Root: Sendable {
        /// As configured, and as its real path: a job may name a file under either spelling.
        var spellings: [[String]]
        var real: String
    }
    let roots: [Root]

    /// Most symlinks followed for one source (Linux's own limit).
    static let maxSymlinks = 40
    /// Bytes read at a time (the cancellation flag is checked between reads).
    static let chunk = 1 << 20

    public init(_ paths: [String]) {
        roots = paths.filter { !$0.isEmpty }.map { path in
            let lexical = Self.components(path)
            let real =
                (realpath(path, nil)).map { p -> String in
                    defer { free(p) }; return String(cString: p)
                } ?? "/" + lexical.joined(separator: "/")
            let realComponents = Self.components(real)
            return Root(spellings: lexical == realComponents ? [lexical] : [lexical, realComponents], real: real)
        }
    }

    public var isEmpty: Bool { roots.isEmpty }

    /// `path` split into components with `.` and `..` resolved lexically (`..` never climbs
    /// above `/`).
    static func components(_ path: String) -> [String] {
        var out: [String] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = out.popLast()
            default: out.append(String(part))
            }
        }
        return out
    }

    /// The root `components` lies beneath (the longest match), and the components below it.
    func locate(_ components: [String]) -> (root: Root, rest: [String])? {
        var best: (Root, [String], Int)?
        for root in roots {
            for spelling in root.spellings where components.count > spelling.count && Array(components.prefix(spelling.count)) == spelling {
                if best == nil || spelling.count > best!.2 { best = (root, Array(components.dropFirst(spelling.count)), spelling.count) }
            }
        }
        return best.map { ($0.0, $0.1) }
    }

    /// Reads the file at absolute `path`: `job.invalid_source` outside every root or not a
    /// regular file, `fetch.file_not_found` when missing or unreadable, `fetch.too_large` over
    /// `maxBytes`, `HalcyonError.abandoned` when `cancel` is raised. `meter` is told of each
    /// chunk read.
    public func read(
        _ path: String, maxBytes: Int, cancel: CancellationFlag, source: String, meter: (any TransferMeter)? = nil
    ) throws(HalcyonError) -> Data {
        guard !roots.isEmpty else {
            throw HalcyonError(.invalidSource, "file:// sources are disabled: start the worker with --file-root DIR", source: source)
        }
        let fd = try open(path, source: source)
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw HalcyonError(.fileNotFound, "cannot stat \(path): \(Self.errno())", source: source) }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw HalcyonError(.invalidSource, "\(path) is not a regular file (\(Self.kind(st.st_mode)))", source: source)
        }
        guard Int(st.st_size) <= maxBytes else {
            throw HalcyonError(.tooLarge, "\(path) is \(st.st_size) bytes, over the \(maxBytes)-byte limit", source: source)
        }
        // One byte more than the file has: the read that finds its end then needs no new buffer
        // (growing a Data copies all of it).
        var data = Data(count: Int(st.st_size) + 1)
        var total = 0
        while true {
            try cancel.check()
            if total == data.count {
                // The file grew after fstat: read on, within the limit.
                guard data.count <= maxBytes else {
                    throw HalcyonError(.tooLarge, "\(path) grew over the \(maxBytes)-byte limit while being read", source: source)
                }
                data.count = min(maxBytes + 1, data.count + Self.chunk)
            }
            let n = data.withUnsafeMutableBytes { raw in
                Glibc.read(fd, raw.baseAddress! + total, min(Self.chunk, raw.count - total))
            }
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw HalcyonError(.fileNotFound, "cannot read \(path): \(Self.errno())", source: source)
            }
            if n == 0 { break }
            total += n
            if let meter, !meter.received(n) { try cancel.check() }
        }
        guard total <= maxBytes else {
            throw HalcyonError(.tooLarge, "\(path) grew over the \(maxBytes)-byte limit while being read", source: source)
        }
        data.count = total
        return data
    }

    /// Opens `path` beneath its root, component by component; returns the file's descriptor.
    func open(_ path: String, source: String) throws(HalcyonError) -> Int32 {
        guard let (start, rest) = locate(Self.components(path)) else {
            throw HalcyonError(.invalidSource, "\(path) is not beneath a configured --file-root", source: source)
        }
        var stack: [Int32] = []
        defer { stack.forEach { close($0) } }
        func enter(_ root: Root) throws(HalcyonError) {
            stack.forEach { close($0) }
            stack = []
            let fd = Glibc.open(root.real, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw HalcyonError(.fileNotFound, "cannot open the file root \(root.real): \(Self.errno())", source: source) }
            stack = [fd]
        }
        try enter(start)
        var pending = rest[...]
        var symlinks = 0
        while let name = pending.first {
            pending = pending.dropFirst()
            if name == "." { continue }
            if name == ".." {
                guard stack.count > 1 else {
                    throw HalcyonError(.invalidSource, "\(path) leads above its --file-root", source: source)
                }
                close(stack.removeLast())
                continue
            }
            let last = pending.isEmpty
            let flags = last ? O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
            let fd = openat(stack.last!, name, flags)
            if fd >= 0 {
                if last { return fd }
                stack.append(fd)
                continue
            }
            let error = Glibc.errno
            guard error == ELOOP || error == ENOTDIR, let target = Self.readlink(stack.last!, name) else {
                if error == ENOTDIR { throw HalcyonError(.fileNotFound, "\(path): '\(name)' is not a directory", source: source) }
                throw HalcyonError(.fileNotFound, "cannot open \(path): \(String(cString: strerror(error)))", source: source)
            }
            symlinks += 1
            guard symlinks <= Self.maxSymlinks else {
                throw HalcyonError(.invalidSource, "\(path): more than \(Self.maxSymlinks) symlinks", source: source)
            }
            if target.hasPrefix("/") {
                guard let (root, below) = locate(Self.components(target)) else {
                    throw HalcyonError(.invalidSource, "\(path): a symlink leads outside every --file-root", source: source)
                }
                try enter(root)
                pending = (below + pending)[...]
            } else {
                pending = (target.split(separator: "/", omittingEmptySubsequences: true).map(String.init) + pending)[...]
            }
        }
        throw HalcyonError(.invalidSource, "\(path) names a file-root itself, not a file beneath it", source: source)
    }

    /// The target of symlink `name` in directory `dir`, nil if it is not a symlink (now).
    static func readlink(_ dir: Int32, _ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlinkat(dir, name, &buffer, buffer.count - 1)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func errno() -> String { String(cString: strerror(Glibc.errno)) }

    static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "not a plain file"
        }
    }
}
