import Foundation
import HalcyonEmbedded
import HalcyonRuntime
import HalcyonTestSupport
import Testing

@testable import HalcyonHosts

/// `CPUCgroup`, what the bench's X caps each host with: the quota as written, a busy process
/// held to it, a process's children moved with it, and the group gone after.
@Suite(
    .enabled(if: CPUCgroup.unavailableReason == nil, Comment(rawValue: CPUCgroup.unavailableReason ?? "")), .serialized,
    .processes)
struct CPUCgroupTests {
    @Test func quotaIsAShareOfTheHundredMillisecondPeriod() {
        #expect(CPUCgroup.quota(cores: 0.25) == 25_000)
        #expect(CPUCgroup.quota(cores: 0.4) == 40_000)
        #expect(CPUCgroup.quota(cores: 2) == 200_000)
        #expect(CPUCgroup.quota(cores: 0.001) == 1000)  // the kernel's minimum
    }

    @Test func capsABusyProcessAndIsRemoved() async throws {
        // A tenth of a core: a busy loop wants more even on a machine loaded twentyfold (at 0.3 a
        // loop given a tenth of a core by a busy machine was never throttled).
        let group = try CPUCgroup.create(name: "hc-\(getpid())-t", cores: 0.1)
        defer { group.remove() }
        switch group.version {
        case .v1:
            #expect(try String(contentsOfFile: "\(group.directory)/cpu.cfs_quota_us", encoding: .utf8).hasPrefix("10000"))
            #expect(try String(contentsOfFile: "\(group.directory)/cpu.cfs_period_us", encoding: .utf8).hasPrefix("100000"))
        case .v2:
            #expect(try String(contentsOfFile: "\(group.directory)/cpu.max", encoding: .utf8).hasPrefix("10000 100000"))
        }
        #expect(group.quotaCores == 0.1)
        let busy = try Subprocess.spawn("/bin/sh", ["-c", "while :; do :; done"], outputPath: "/dev/null")
        let started = Date()
        try group.add(busy)
        #expect(group.pids() == [busy])
        // At least 1.5 s, and until the cap has bitten (at most 20 s).
        try await Task.sleep(for: .seconds(1.5))
        for _ in 0..<37 where (group.throttling?.throttled ?? 0) == 0 { try await Task.sleep(for: .milliseconds(500)) }
        let used = try #require(group.usageSeconds, "cpuacct or cpu.stat accounts for the group's CPU")
        let elapsed = Date().timeIntervalSince(started)
        kill(busy, SIGKILL)
        _ = Subprocess.status(of: busy, block: true)
        // A busy loop wants a whole core; the cap holds it to 0.1 (one period's slack).
        #expect(used > 0.01 && used <= 0.1 * elapsed + 0.1, "used \(used) s of CPU in \(elapsed) s")
        let throttling = try #require(group.throttling)
        #expect(throttling.throttled > 0 && throttling.throttledSeconds > 0, "\(throttling)")
        group.remove()
        #expect(!FileManager.default.fileExists(atPath: group.directory))
        if let accounting = group.accountingDirectory { #expect(!FileManager.default.fileExists(atPath: accounting)) }
        group.remove()  // again: nothing left to do
    }

    /// A process that started a child before it was put in the group: both end up inside (the
    /// window between a spawn and `add`).
    @Test func movesWhatTheProcessStartedBeforeIt() async throws {
        let group = try CPUCgroup.create(name: "hc-\(getpid())-u", cores: 0.5)
        defer { group.remove() }
        let parent = try Subprocess.spawn("/bin/sh", ["-c", "sleep 30 & wait"], outputPath: "/dev/null")
        defer {
            kill(parent, SIGKILL)
            _ = Subprocess.status(of: parent, block: true)
        }
        var child: pid_t?
        for _ in 0..<100 where child == nil {
            child = ProcessMemory.children(of: parent).first
            if child == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        let sleeper = try #require(child)
        try group.add(parent)
        #expect(Set(group.pids()) == [parent, sleeper])
        kill(sleeper, SIGKILL)
        kill(parent, SIGKILL)
        _ = Subprocess.status(of: parent, block: true)
        // Removal waits for (or kills) what is left, then the directory goes.
        group.remove()
        #expect(!FileManager.default.fileExists(atPath: group.directory))
    }

}

/// Where neither hierarchy can be written, the refusal names every path tried and why (here:
/// directories that look mounted but are not cgroups, so their control files do not exist).
@Test func cpuCgroupRefusalNamesWhatWasTried() throws {
    let root = try TestEnvironment.temporaryDirectory("cgroup-refusal")
    let v1 = root.appendingPathComponent("cpu"), v2 = root.appendingPathComponent("unified")
    try FileManager.default.createDirectory(at: v1, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: v2, withIntermediateDirectories: true)
    try Data().write(to: v2.appendingPathComponent("cgroup.controllers"))
    let table = "cgroup \(v1.path) cgroup rw,relatime,cpu 0 0\ncgroup2 \(v2.path) cgroup2 rw,relatime 0 0\n"
    let error = #expect(throws: (any Error).self) { try CPUCgroup.create(name: "hc-\(getpid())-w", cores: 0.5, mountTable: table) }
    let message = error?.localizedDescription ?? ""
    #expect(message.contains("cgroup v1 \(v1.path): open \(v1.path)/hc-\(getpid())-w/cpu.cfs_period_us: No such file or directory"), "\(message)")
    #expect(message.contains("cgroup v2 \(v2.path): the cpu controller is not available there"), "\(message)")
    // The half-made group is not left behind.
    #expect(!FileManager.default.fileExists(atPath: v1.appendingPathComponent("hc-\(getpid())-w").path))
    let none = #expect(throws: (any Error).self) { try CPUCgroup.create(name: "hc-\(getpid())-w", cores: 0.5, mountTable: "") }
    #expect(none?.localizedDescription.contains("no hierarchy with the cpu controller is mounted") == true)
    #expect(none?.localizedDescription.contains("no unified hierarchy is mounted") == true)
}
