import Foundation
import HalcyonRuntime

/// The whole machine's CPU time by kind (`/proc/stat`'s first line), to tell a tool's own CPU
/// use from what else ran meanwhile: PostgreSQL, the kernel's I/O, the bench, the hypervisor.
struct MachineCPU {
    var busy: Double, idle: Double, steal: Double

    static func now() -> MachineCPU? {
        guard let text = KernelFile.text("/proc/stat"),
            let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let v = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard v.count >= 8 else { return nil }
        // user nice system idle iowait irq softirq steal (guest time is already in user).
        return MachineCPU(busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7])
    }

    /// Shares of the time between `self` and `later`: busy, idle, stolen (they sum to 1).
    func shares(until later: MachineCPU) -> MachineShare? {
        let b = later.busy - busy, i = later.idle - idle, s = later.steal - steal
        let total = b + i + s
        return total > 0 ? MachineShare(busy: b / total, idle: i / total, steal: s / total) : nil
    }
}

/// How the machine's cores spent a run.
struct MachineShare {
    var busy: Double, idle: Double, steal: Double
}
