import Dispatch
import Foundation
import HalcyonEmbedded
import Testing

@Suite struct SubprocessTests {
    /// A child spawned from a Dispatch worker thread (whose mask blocks SIGTERM) must still
    /// start with nothing blocked or ignored, so a plain `kill` stops it.
    @Test func childrenStartWithNoSignalBlocked() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("sigmask-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: out) }
        let status = try await withCheckedThrowingContinuation { (k: CheckedContinuation<Int32, Error>) in
            DispatchQueue.global().async {
                do {
                    let pid = try Subprocess.spawn("/bin/sh", ["-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status"], outputPath: out.path)
                    k.resume(returning: Subprocess.status(of: pid, block: true) ?? -1)
                } catch { k.resume(throwing: error) }
            }
        }
        #expect(status == 0)
        let text = try String(contentsOf: out, encoding: .utf8)
        #expect(text.contains("SigBlk:\t0000000000000000"), "\(text)")
        // glibc's posix_spawn leaves its two internal real-time signals (32, 33) ignored; the
        // standard ones (1–31) must all be at their defaults.
        let ignored = text.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }.flatMap {
            UInt64($0.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        #expect(ignored.map { $0 & 0x7FFF_FFFF } == 0, "\(text)")
    }

    @Test func aSpawnedSleeperStopsOnSIGTERM() async throws {
        let pid = try await Task.detached { try Subprocess.spawn("/bin/sleep", ["30"], outputPath: "/dev/null") }.value
        kill(pid, SIGTERM)
        let status = await Task.detached { Subprocess.status(of: pid, block: true) }.value
        #expect(status == 128 + SIGTERM)
    }
}
