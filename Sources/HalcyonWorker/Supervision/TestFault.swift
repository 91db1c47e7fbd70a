import CMalloc
import Foundation

/// A fault the test suite injects into image work, to prove the supervisor contains it:
/// `HALCYON_TEST_FAULT=KIND:MARKER[;KIND:MARKER…]` makes a job whose source contains MARKER, once in
/// processing, do KIND — `segv` (a store through an invalid pointer: a real SIGSEGV on the
/// processing thread), `abort`, `hang` (sleep for an hour in one call, as a C library stuck in a
/// loop would), `hangfirst` (hang in the first image process only: after a restart the job runs
/// normally) or `allocate` (touch 1 GiB, a runaway allocation). It reaches image work through one
/// hook, `JobRunner.chainStarted`, which `Worker` fills with `hook`: nil when the variable is
/// unset — always, outside the tests — so production runs no fault code at all.
enum TestFault: Sendable {
    case segv, abort, hang, hangFirst, allocate

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
            case "allocate": return (.allocate, parts[1])
            default: return nil
            }
        }
    }()

    /// `strike`, when faults are configured; nil otherwise.
    static var hook: (@Sendable (_ sources: [String]) -> Void)? { configured.isEmpty ? nil : { @Sendable sources in strike(sources: sources) } }

    /// Strikes when one of `sources` carries the marker. Blocking: call on a processing thread.
    static func strike(sources: [String]) {
        guard !configured.isEmpty, let (fault, _) = configured.first(where: { f in sources.contains { $0.contains(f.marker) } }) else { return }
        switch fault {
        case .segv:
            // Through a pointer the optimiser cannot see is invalid (getpid() is never 0).
            UnsafeMutablePointer<Int>(bitPattern: getpid() > 0 ? 8 : 16)!.pointee = 1
        case .abort:
            Glibc.abort()
        case .hang:
            sleep(3600)
        case .hangFirst:
            if (ProcessInfo.processInfo.environment[Supervisor.restartsKey] ?? "0") == "0" { sleep(3600) }
        case .allocate:
            // Through the C shim: a malloc and memset in Swift are removed by the optimiser
            // in a release build, which then only hangs.
            _ = hc_test_touch_allocation(1 << 30)
            sleep(3600)
        }
    }
}
