import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonQueue
import HalcyonRuntime
import HalcyonStore
import HalcyonStoreMaintenance

/// `--store-size-limit` for `sweep` and `work`.
struct StoreSizeLimitOption: ParsableArguments {
    @Option(
        help:
            "Size the store may reach before sweeps trim it to half of it (kept originals first, then results, least recently used first), e.g. 20GiB (default: no limit)."
    )
    var storeSizeLimit: ByteSizeArgument?

    func validate() throws {
        try storeSizeLimit?.check("--store-size-limit", 1...(1 << 50))
    }

    var bytes: Int64? { storeSizeLimit.map { Int64($0.bytes) } }
}

struct Sweep: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sweep",
        abstract: "Delete expired store files and keys; trim the store to a size limit.",
        discussion: """
            Deletes objects and kept originals whose expiry has passed, keys that expired or \
            point at nothing, and temp files over an hour old; then, over --store-size-limit, \
            trims what is left to at most half the limit, within one object of it: kept \
            originals first (they are downloaded again when needed), then results, each least \
            recently used first (on disk the last access, atime; in a bucket the last write or \
            extension). Safe while workers run: on disk each deletion re-checks its reason under \
            the file's lock; in a bucket the keys naming a trimmed result are deleted before it. \
            One sweeper at a time (the store_sweep lease in halcyon.leases, shared with the \
            workers' periodic sweeps): if one is running, this waits for it.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var limit: StoreSizeLimitOption
    @Flag(help: "Print the report as JSON.")
    var json = false

    func run() async throws {
        let (connection, _) = try await database.connect()
        let store = try storeOptions.open()
        let maintenance = StoreMaintenance(store: store, sizeLimit: limit.bytes, sweptBy: "halcyon sweep")
        guard
            let report = try await maintenance.sweep(
                JobQueue(connection: connection), waitForLock: true,
                onWait: {
                    printError("another sweep is running; waiting for it to finish…")
                })
        else { throw CommandFailure("could not take the sweep lock") }
        await connection.close()
        if json {
            print(report.json.prettyText)
            if report.failure != nil { throw ExitCode(1) }
            return
        }
        print(
            """
            store \(store.location), swept in \(String(format: "%.2f", report.seconds)) s
              expired objects:   \(report.expiredObjects) (\(ByteSize.format(report.expiredBytes)))
              expired originals: \(report.expiredOriginals) (\(ByteSize.format(report.expiredOriginalBytes)))
              trimmed for size:  \(report.trimmedObjects) (\(ByteSize.format(report.trimmedBytes)))
              keys removed:      \(report.removedKeys) (expired, dangling, unreadable, or naming a trimmed result)
              temp files:        \(report.removedTempFiles)
              freed:             \(ByteSize.format(report.freedBytes))
              now:               \(report.keptFiles) files, \(ByteSize.format(report.keptBytes))\(report.sizeLimit.map { " of \(ByteSize.format($0))" } ?? ""), \(report.keptKeys) keys
            """)
        if let failure = report.failure {
            printError("sweep incomplete: \(failure)")
            throw ExitCode(1)
        }
    }
}

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Re-hash every stored object; report (and with --repair remove) any whose bytes no longer match their name.",
        discussion: """
            Objects are named by the SHA-256 of their bytes, so a mismatch means the object was \
            damaged in the store. --repair deletes such objects and the keys pointing at them \
            (in a bucket the keys first, so no store hit names a deleted object): later jobs for \
            those keys process the source again. Exit status 1 when something is corrupt (also \
            after --repair, so a cron job notices) or when not every object or key could be \
            read. Needs no database.
            """)

    @OptionGroup var storeOptions: StoreOptions
    @Flag(help: "Remove corrupt objects and their keys.")
    var repair = false
    @Flag(help: "Print the report as JSON.")
    var json = false

    func run() async throws {
        let store = try storeOptions.open()
        let repair = self.repair
        let report = await store.verify(repair: repair)
        if json {
            print(
                JSONValue.object([
                    "checked_objects": .number(Double(report.checkedObjects)), "checked_bytes": .number(Double(report.checkedBytes)),
                    "corrupt": .array(report.corrupt.map { .string($0) }), "removed_objects": .number(Double(report.removedObjects)),
                    "removed_keys": .number(Double(report.removedKeys)), "vanished": .number(Double(report.vanished)),
                    "seconds": .number((report.seconds * 1000).rounded() / 1000),
                    "failure": report.failure.map { .string($0) } ?? .null,
                ]).prettyText)
        } else {
            print(
                "checked \(report.checkedObjects) objects (\(ByteSize.format(report.checkedBytes))) in \(String(format: "%.2f", report.seconds)) s"
                    + (report.vanished > 0 ? "; \(report.vanished) removed by a sweep while verifying" : ""))
            for path in report.corrupt { print("corrupt: \(path)") }
            if repair, !report.corrupt.isEmpty {
                print("removed \(report.removedObjects) corrupt objects and \(report.removedKeys) keys pointing at them")
            } else if report.corrupt.isEmpty {
                print("all objects match their names")
            }
        }
        if let failure = report.failure {
            printError("verify incomplete: \(failure)")
            throw ExitCode(1)
        }
        if !report.corrupt.isEmpty { throw ExitCode(1) }
    }
}
