import Foundation
import HalcyonDomain

/// The store's one way of writing a file: into a temp file on the same filesystem, fsynced,
/// published at its final path in one step, directory fsynced. No reader ever sees a partial
/// file at `final`; on any failure the temp file is removed and `store.write_failed` thrown.
enum AtomicFile {
    enum Publish {
        /// `rename`: the new file replaces whatever is at `final` (key files, originals).
        case replace
        /// `link`: if a file is already at `final` it stays and the new one is dropped — for
        /// content-addressed objects, where it has the same bytes and its expiry must survive.
        case keepExisting
    }

    enum Outcome { case written, alreadyThere }

    /// `prepare` runs on the temp file's descriptor before it is published (e.g. to set its
    /// times). `durable: false` skips both fsyncs (for files that are only an index, like keys).
    @discardableResult
    /// `sync` fsyncs a directory (tests watch which ones).
    static func write(
        _ data: Data, to final: URL, tmpDirectory: URL, publish: Publish = .replace, durable: Bool = true,
        prepare: (Int32) -> Void = { _ in },
        sync: (URL) throws(HalcyonError) -> Void = { (d: URL) throws(HalcyonError) in try AtomicFile.syncDirectory(d) }
    ) throws(HalcyonError) -> Outcome {
        let directory = final.deletingLastPathComponent()
        if durable {
            try makeDirectories(directory, sync: sync)
        } else {
            try makeDirectories(directory) { (_: URL) throws(HalcyonError) in }
        }
        try makeDirectories(tmpDirectory) { (_: URL) throws(HalcyonError) in }
        let tmp = tmpDirectory.appendingPathComponent("\(final.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).part")
        let fd = open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw storeWriteError(errno, "cannot create a temp file in \(tmpDirectory.path)") }
        var failure: Int32 = 0
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        if failure == 0 { prepare(fd) }
        if failure == 0, durable, fsync(fd) != 0 { failure = errno }
        close(fd)
        var outcome = Outcome.written
        if failure == 0 {
            switch publish {
            case .replace:
                if rename(tmp.path, final.path) != 0 { failure = errno }
            case .keepExisting:
                if link(tmp.path, final.path) == 0 {
                    unlink(tmp.path)
                } else if errno == EEXIST {
                    outcome = .alreadyThere
                    unlink(tmp.path)
                } else {
                    failure = errno
                }
            }
        }
        if failure != 0 {
            unlink(tmp.path)
            throw storeWriteError(failure, "writing \(data.count) bytes to \(final.lastPathComponent) failed")
        }
        guard durable, outcome == .written else { return outcome }
        try sync(directory)
        return outcome
    }

    /// Creates `directory` and any missing parents, one level at a time; `sync` gets each new
    /// directory's entry is fsynced in its parent — else a crash could lose the new
    /// `objects/ab/cd` and the object in it, which the job row already calls succeeded.
    static func makeDirectories(_ directory: URL, sync: (URL) throws(HalcyonError) -> Void) throws(HalcyonError) {
        var missing: [URL] = []
        var d = directory
        while !FileManager.default.fileExists(atPath: d.path), d.path != "/" {
            missing.append(d)
            d = d.deletingLastPathComponent()
        }
        for dir in missing.reversed() {
            if mkdir(dir.path, 0o755) != 0 {
                guard errno == EEXIST else { throw storeWriteError(errno, "cannot create \(dir.path)") }
                continue  // another writer made it; it syncs its parent
            }
            try sync(dir.deletingLastPathComponent())
        }
    }

    static func syncDirectory(_ directory: URL) throws(HalcyonError) {
        let dfd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else { throw storeWriteError(errno, "cannot open \(directory.path)") }
        defer { close(dfd) }
        if fsync(dfd) != 0 { throw storeWriteError(errno, "fsync of \(directory.path) failed") }
    }
}

/// A store write's failure from its `errno`: `store.not_writable` when the store cannot take
/// writes at all (no space, a quota, read-only, no permission: the worker's condition, not the
/// job's), else `store.write_failed`. The message is `what` and the system's words.
func storeWriteError(_ code: Int32, _ what: String) -> HalcyonError {
    let message = "\(what): \(String(cString: strerror(code)))"
    switch code {
    case ENOSPC, EDQUOT, EROFS, EACCES, EPERM: return HalcyonError(.notWritable, message)
    default: return HalcyonError(.writeFailed, message)
    }
}
