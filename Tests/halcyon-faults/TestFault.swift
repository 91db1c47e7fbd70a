import Foundation
import HalcyonWorker

/// A fault the test suite injects into image work, to prove the supervisor contains it:
/// `HALCYON_TEST_FAULT=KIND:MARKER[;KIND:MARKER…]` makes a job whose source contains MARKER, once in
/// processing, do KIND — `segv` (a store through an invalid pointer: a real SIGSEGV on the
/// processing thread), `abort`, `hang` (sleep for an hour in one call, as a C library stuck in a
/// loop would), `hangfirst` (hang in the first image process only: after a restart the job runs
/// normally), `spin` and `spinfirst` (the same, computing all the while: a call stuck burning
/// CPU), `burn` (compute for 1.5 CPU seconds, then go on: a step slower than its deadline) or
/// `allocate` (make 1 GiB resident, a runaway allocation).
///
/// Only this executable (`halcyon-faults`) has it: it reaches image work through the hook
/// `halcyon work` passes to `JobRunner.chainStarted`, which `halcyon` leaves nil.
enum TestFault: Sendable {
    case segv, abort, hang, hangFirst, spin, spinFirst, burn, allocate

    static let environmentKey = "HALCYON_TEST_FAULT"

    /// The faults and their markers, read once (`KIND:MARKER`, several separated by `;`).
    static let configured: [(fault: TestFault, marker: String)] = {
        guard let text = ProcessInfo.processInfo.environment[environmentKey] else { return [] }
        return text.split(separator: ";").compactMap { entry in
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else { return nil }
            switch parts[0] {
            case "segv": return (.segv, parts[1])
            case "abort": return (.abort, parts[1])
            case "hang": return (.hang, parts[1])
            case "hangfirst": return (.hangFirst, parts[1])
            case "spin": return (.spin, parts[1])
            case "spinfirst": return (.spinFirst, parts[1])
            case "burn": return (.burn, parts[1])
            case "allocate": return (.allocate, parts[1])
            default: return nil
            }
        }
    }()

    /// `strike`, when faults are configured; nil otherwise.
    static var hook: ChainStartedHook? { configured.isEmpty ? nil : { @Sendable sources in strike(sources: sources) } }

    /// Whether this is the supervisor's first image process (no restart before it).
    static var isFirstProcess: Bool { (ProcessInfo.processInfo.environment[Supervisor.restartsKey] ?? "0") == "0" }

    /// Computes on this thread until it has used `seconds` of CPU (its own clock: a busy machine
    /// makes it take longer, never shorter).
    static func compute(seconds: Double) {
        var t = timespec()
        func cpu() -> Double {
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
            return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
        }
        let until = cpu() + seconds
        var x: UInt64 = 1
        while cpu() < until {
            for _ in 0..<10_000 { x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407 }
        }
        if x == 42 { print(x) }  // the loop is not optimised away
    }

    /// Strikes when one of `sources` carries the marker. Blocking: call on a processing thread.
    static func strike(sources: [String]) {
        guard let (fault, _) = configured.first(where: { f in sources.contains { $0.contains(f.marker) } }) else { return }
        switch fault {
        case .segv:
            // Through a pointer the optimiser cannot see is invalid (getpid() is never 0).
            UnsafeMutablePointer<Int>(bitPattern: getpid() > 0 ? 8 : 16)!.pointee = 1
        case .abort:
            Glibc.abort()
        case .hang:
            sleep(3600)
        case .hangFirst:
            if isFirstProcess { sleep(3600) }
        case .spin:
            compute(seconds: 3600)
        case .spinFirst:
            if isFirstProcess { compute(seconds: 3600) }
        case .burn:
            compute(seconds: 1.5)
        case .allocate:
            // Mapped and populated by the kernel (MAP_POPULATE): resident at once, and nothing an
            // optimiser could remove, as it may a malloc and memset. Never unmapped.
            _ = mmap(nil, 1 << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0)
            sleep(3600)
        }
    }
}
