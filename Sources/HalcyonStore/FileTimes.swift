import Foundation

/// The two file attributes the store lives by, Kingfisher's DiskStorage scheme adapted to Linux
/// (which has no settable creation date): **mtime = expiry instant, atime = last access**. Both
/// are always set explicitly (`futimens`/`utimensat`), never left to the kernel's
/// relatime/noatime rules; the time to live is mtime − atime. Read them with
/// `stat -c '%x accessed, %y expires' FILE`.
public struct FileTimes: Sendable, Equatable {
    public var accessed: Date
    public var expires: Date

    public init(accessed: Date, expires: Date) {
        self.accessed = accessed
        self.expires = expires
    }

    init(_ st: stat) {
        accessed = Self.date(st.st_atim)
        expires = Self.date(st.st_mtim)
    }

    /// The times of `path` itself (a symlink is not followed), nil if it does not exist.
    public static func read(_ path: String) -> FileTimes? {
        var st = stat()
        return lstat(path, &st) == 0 ? FileTimes(st) : nil
    }

    /// Sets both times of `path`; false (with errno) on failure.
    @discardableResult
    public func write(to path: String) -> Bool {
        var times = [Self.timespec(accessed), Self.timespec(expires)]
        return utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// Sets both times of an open file; false (with errno) on failure.
    @discardableResult
    public func write(to fd: Int32) -> Bool {
        var times = [Self.timespec(accessed), Self.timespec(expires)]
        return futimens(fd, &times) == 0
    }

    static func date(_ t: Glibc.timespec) -> Date {
        Date(timeIntervalSince1970: Double(t.tv_sec) + Double(t.tv_nsec) / 1e9)
    }

    static func timespec(_ date: Date) -> Glibc.timespec {
        let t = date.timeIntervalSince1970
        let seconds = t.rounded(.down)
        return Glibc.timespec(tv_sec: Int(seconds), tv_nsec: min(999_999_999, Int((t - seconds) * 1e9)))
    }
}
