import ArgumentParser
import Foundation
import HalcyonCore
import HalcyonImage
import HalcyonQueue
import HalcyonWorker

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Generate sample images, enqueue jobs for them, run a worker until drained, print the status.",
        discussion: "Uses the embedded database unless one is given. Re-runnable: each run enqueues a fresh batch; identical results share their stored objects.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var storeOptions: StoreOptions
    @OptionGroup var logging: LoggingOptions

    static let chains = [
        "resize(320x320, mode=fill) |> format(jpeg, quality=82)",
        "resize(800x800) |> format(webp, quality=80)",
        "resize(96x96, mode=fill) >> format(png)",
    ]

    func run() async throws {
        let logger = logging.makeLogger()
        let (connection, conninfo) = try await database.connect()
        let images = EmbeddedCluster.defaultHome().appendingPathComponent("demo/images")
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        let samples: [(String, Int, Int, ImageFormat, Bool)] = [
            ("landscape.jpg", 1920, 1080, .jpeg, false), ("portrait.jpg", 900, 1400, .jpeg, false),
            ("large.jpg", 3200, 2400, .jpeg, false), ("badge.png", 600, 400, .png, true),
        ]
        for (i, s) in samples.enumerated() {
            let path = images.appendingPathComponent(s.0)
            if FileManager.default.fileExists(atPath: path.path) { continue }
            let data = try SampleImages.photo(width: s.1, height: s.2, seed: UInt64(i + 1), format: s.3, alpha: s.4)
            try data.write(to: path, options: .atomic)
        }
        print("sample images in \(images.path)")

        var jobs: [JobQueue.NewJob] = []
        for s in samples {
            for chain in Self.chains {
                var job = JobQueue.NewJob(source: "file://" + images.appendingPathComponent(s.0).path)
                job.processors = chain
                jobs.append(job)
            }
        }
        // A job that cannot succeed, to show a permanent failure with its code.
        var missing = JobQueue.NewJob(source: "file://" + images.appendingPathComponent("missing.jpg").path)
        missing.processors = Self.chains[0]
        jobs.append(missing)
        let ids = try await JobQueue(connection: connection).enqueue(batch: jobs)
        print("enqueued \(ids.count) jobs (\(ids.first!)…\(ids.last!)); running a worker until drained…")
        await connection.close()

        var c = WorkerConfiguration(storeRoot: storeOptions.root())
        c.drain = true
        c.fetch.fileRoots = [images.path]
        c.lease = 10
        let started = Date()
        let summary = try await Worker(configuration: c, conninfo: conninfo, logger: logger).run()
        let seconds = Date().timeIntervalSince(started)
        print(String(format: "worker done in %.1fs: %d succeeded, %d failed\n", seconds, summary.succeeded, summary.failed))

        let (again, _) = try await database.connect()
        let status = try await QueueStatus.load(again)
        print(Status.render(status))
        print("outputs: \(storeOptions.root().appendingPathComponent("objects").path)")
        print("inspect one: halcyon show \(ids.first!)   (the failed one: halcyon show \(ids.last!))")
    }
}
