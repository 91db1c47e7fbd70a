// swift-tools-version:6.1
import PackageDescription

// Halcyon: a batch image pipeline worker fed by a PostgreSQL job queue.
// One library module per concern (see docs/architecture.md); thin C shims under Sources/C*.
/// Include paths of ImageMagick 6 on Debian (both multiarch triplets, for the Docker image).
let magickIncludes: [SwiftSetting] = [
    .unsafeFlags([
        "-Xcc", "-I/usr/include/ImageMagick-6",
        "-Xcc", "-I/usr/include/x86_64-linux-gnu/ImageMagick-6",
        "-Xcc", "-I/usr/include/aarch64-linux-gnu/ImageMagick-6",
    ])
]

let package = Package(
    name: "Halcyon",
    platforms: [.macOS(.v14)],
    products: [
        // The worker and the operator commands: what production runs.
        .executable(name: "halcyon", targets: ["halcyon"]),
        // The benchmark and the demo, programs of their own (`halcyon bench` and `halcyon demo`
        // run them): neither they nor the sample images are in the worker's binary.
        .executable(name: "halcyon-bench", targets: ["halcyon-bench"]),
        .executable(name: "halcyon-demo", targets: ["halcyon-demo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        // Every HTTP surface (dashboard, metrics and health, the demo's origin). No package traits:
        // their default, swift-configuration support, is a package more to build for nothing here.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.0", traits: []),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.0"),
        // Already Hummingbird's; named for the HTTP/1 pipeline HalcyonHTTP sets up itself.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0", traits: []),
    ],
    targets: [
        // C libraries, linked through pkg-config.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // No pkgConfig here: SwiftPM would warn about (and drop) the -D/-fopenmp flags MagickWand's
        // .pc carries; the shim header defines what matters and `magickIncludes` adds the paths.
        .systemLibrary(name: "CMagickWand", providers: [.apt(["libmagickwand-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // glibc's <malloc.h> (mallopt), which the Glibc module leaves out.
        .systemLibrary(name: "CMalloc"),
        // libjpeg-turbo and libpng called directly (the direct lane and the bench's decode floor):
        // a few C wrappers, since libjpeg reports errors by longjmp.
        // Optimised in debug builds too: its Gaussian loops run in every test that blurs.
        .target(
            name: "CImageCodecs", cSettings: [.unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("jpeg"), .linkedLibrary("png16"), .linkedLibrary("heif"), .linkedLibrary("webp"), .linkedLibrary("jxl")]),
        // Perceptual metrics in C (SSIMULACRA 2.1: a reference prepared once, scored against many
        // encodes). Optimised in debug builds too: the tests score hundreds of pairs.
        .target(name: "CPerceptual", cSettings: [.unsafeFlags(["-O2"])], linkerSettings: [.linkedLibrary("m")]),

        // Runtime utilities every module may use: blocking-call offload, cancellation, semaphores,
        // serial threads, signals, logging, JSON text, durations and sizes, digests.
        .target(
            name: "HalcyonRuntime",
            dependencies: [
                "CMalloc", "CCrypto", .product(name: "Logging", package: "swift-log"),
            ]),
        // The domain's vocabulary: categorized errors, job options, expiration, retry options,
        // image formats, source facts, placeholders, stage timings, configuration settings.
        .target(name: "HalcyonDomain", dependencies: ["HalcyonRuntime"]),
        // HTTP servers on Hummingbird: one HTTP/1.1 pipeline with Halcyon's limits (whole-request
        // deadline, bounded head and body, connections with eviction), shared by every surface.
        .target(
            name: "HalcyonHTTP",
            dependencies: [
                "HalcyonDomain", "HalcyonRuntime",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // PostgreSQL: connection, migrations, the job queue (claim, lease, complete, rescue).
        // Its SQL is in Queries/*.sql, embedded in the binary (no resource bundle to install).
        .target(
            name: "HalcyonQueue", dependencies: ["HalcyonDomain", "HalcyonRuntime", "CLibPQ", .product(name: "Logging", package: "swift-log")],
            resources: [.embedInCode("Queries")]),
        // Sources and downloads.
        // libcurl's easy handles, pooled: shared by the downloads (HalcyonFetch) and the S3 client.
        .target(name: "HalcyonCurl", dependencies: ["CCurl"]),
        .target(name: "HalcyonFetch", dependencies: ["HalcyonDomain", "HalcyonRuntime", "HalcyonS3", "HalcyonCurl", "CCurl"]),
        // The chain grammar on its own: the lexer and parser, each step's parameters, argument checks
        // and canonical identifier, preset expansion, the output sizes the plan needs. No ImageMagick:
        // what parses and names a chain (the dashboard, `halcyon enqueue|validate|preset`) needs no more.
        // Optimised in debug builds too, as it was inside HalcyonImage: the suite fuzzes it (20,000
        // chains a run, a million in a long one), about twice as fast so.
        .target(
            name: "HalcyonChain", dependencies: ["HalcyonDomain", "HalcyonRuntime"],
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        // The processors (each chain step's work on pixels) and MagickWand.
        .target(
            name: "HalcyonImage", dependencies: ["HalcyonChain", "HalcyonDomain", "HalcyonRuntime", "CMagickWand", "CImageCodecs", "CPerceptual"],
            // Optimised in debug builds too: its resampler and pixel loops are generic Swift that runs
            // 20–50× slower unoptimised, and the test suite's workers spent most of their CPU there.
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        // Content-addressed disk store.
        .target(name: "HalcyonStore", dependencies: ["HalcyonDomain", "HalcyonRuntime", "HalcyonS3"]),
        // S3 client for the object-store backend: SigV4 (own, on libcrypto through Digest),
        // configuration from the AWS variables, blocking requests through libcurl.
        .target(name: "HalcyonS3", dependencies: ["HalcyonDomain", "HalcyonRuntime", "HalcyonCurl", "CCurl"]),
        // One sweep of the store under the fleet-wide sweep lease, recorded in the database: what
        // workers run periodically and `halcyon sweep` on demand.
        .target(
            name: "HalcyonStoreMaintenance",
            dependencies: ["HalcyonRuntime", "HalcyonQueue", "HalcyonStore", .product(name: "Logging", package: "swift-log")]),
        // Traces: spans exported over OTLP/HTTP (protobuf written here, POSTed through libcurl),
        // configured by OpenTelemetry's environment variables.
        .target(
            name: "HalcyonTracing",
            dependencies: ["CCurl", "HalcyonCurl", "HalcyonDomain", "HalcyonRuntime", .product(name: "Logging", package: "swift-log")]),
        // The worker runtime: claim loop, slots, heartbeat, rescuer, graceful stop.
        .target(
            name: "HalcyonWorker",
            dependencies: [
                "HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonFetch", "HalcyonChain", "HalcyonImage", "HalcyonStore",
                "HalcyonStoreMaintenance", "HalcyonHTTP", "HalcyonS3", "HalcyonTracing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // The operators' web dashboard (`halcyon dashboard`): pages and JSON over the queue and the store.
        // Pages are mustache templates (Templates/*.mustache), compiled in as Templates.swift by
        // scripts/dashboard-templates, so the binary needs no file beside it.
        .target(
            name: "HalcyonDashboard",
            dependencies: [
                "HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonChain", "HalcyonStore", "HalcyonHTTP", "HalcyonS3",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "HTTPTypes", package: "swift-http-types"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Templates"]),

        // Not what a worker runs: the embedded PostgreSQL cluster (the CLI's default database,
        // and the demo's, the bench's and the tests'), sample images, the CLI's shared options,
        // and the bench and demo commands.
        .target(name: "HalcyonEmbedded", dependencies: []),
        // Optimised in debug builds too: the demo, the bench's corpus and the tests make their
        // images with it, and unoptimised its pixel loops were a tenth of the suite's CPU.
        .target(
            name: "HalcyonSamples", dependencies: ["HalcyonDomain", "HalcyonImage", "CMagickWand"],
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        .target(
            name: "HalcyonCLI",
            dependencies: [
                "HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonEmbedded", "HalcyonStore", "HalcyonS3",
                .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Logging", package: "swift-log"),
            ]),
        // "Hosts" as Linux network namespaces joined by veth pairs, and TCP forwarders (an embedded
        // python3 script) that put the root namespace's services on their links: the bench's X
        // and the cross-host test. Not the worker's: `halcyon` does not link it.
        .target(name: "HalcyonHosts", dependencies: ["HalcyonEmbedded", "HalcyonRuntime"], resources: [.embedInCode("tcp_forward.py")]),
        // The bench's yardsticks, shared with the tests: how far an output is from the best fill one
        // could make (PSNR against ImageMagick's Lanczos on a full decode: Q, E, and the image
        // tests), and a job table as hours of work leave it (S, the soak, and the query plans' tests).
        .target(name: "HalcyonQualityReference", dependencies: ["HalcyonChain", "HalcyonDomain", "HalcyonImage", "CMagickWand"]),
        .target(name: "HalcyonBacklog", dependencies: ["HalcyonQueue"], resources: [.embedInCode("Queries")]),
        .target(
            name: "HalcyonBench",
            dependencies: [
                "HalcyonCLI", "HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonChain", "HalcyonImage", "HalcyonStore", "HalcyonS3",
                "HalcyonEmbedded", "HalcyonSamples", "HalcyonHosts", "HalcyonQualityReference", "HalcyonBacklog",
                "CMagickWand",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ], resources: [.embedInCode("Queries")]),
        .target(
            name: "HalcyonDemo",
            dependencies: [
                "HalcyonCLI", "HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonFetch", "HalcyonImage", "HalcyonWorker", "HalcyonEmbedded",
                "HalcyonSamples", "HalcyonStore", "HalcyonHTTP", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Every command of the `halcyon` binary, one file per command (Sources/HalcyonCommands);
        // `halcyon` is its entry point alone, so the suite's fault-injecting build runs the same
        // commands with one hook added.
        .target(
            name: "HalcyonCommands",
            dependencies: [
                "HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonFetch", "HalcyonChain", "HalcyonImage", "HalcyonStore",
                "HalcyonStoreMaintenance", "HalcyonWorker", "HalcyonTracing",
                "HalcyonCLI", "HalcyonEmbedded", "HalcyonDashboard",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(name: "halcyon", dependencies: ["HalcyonCommands"]),

        .executableTarget(
            name: "halcyon-bench", dependencies: ["HalcyonBench", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(
            name: "halcyon-demo", dependencies: ["HalcyonDemo", .product(name: "ArgumentParser", package: "swift-argument-parser")]),

        // Fuzzing (scripts/fuzz, Tests/Fixtures/fuzz/README.md): each parser's entry for libFuzzer, one
        // executable per target; never linked into `halcyon`. Built as usual, each executable runs the
        // files named on its command line once; scripts/fuzz builds one with -sanitize=fuzzer.
        .target(name: "HalcyonFuzz", dependencies: ["HalcyonChain", "HalcyonDomain", "HalcyonRuntime", "HalcyonImage", "HalcyonFetch"]),

        // `halcyon` with the suite's fault injection (HALCYON_TEST_FAULT: a crash, an abort, a hang
        // or a runaway allocation in image work), for the tests of the supervisor and of shutdown.
        // Built with the tests, or by `swift build --product halcyon-faults`; never installed.
        .executableTarget(name: "halcyon-faults", dependencies: ["HalcyonCommands", "HalcyonWorker"], path: "Tests/halcyon-faults"),

        // Helpers for the integration tests: throwaway databases, the origin, worker processes.
        .target(
            name: "HalcyonTestSupport",
            dependencies: ["HalcyonDomain", "HalcyonRuntime", "HalcyonQueue", "HalcyonFetch", "HalcyonEmbedded", "HalcyonHosts"],
            path: "Tests/HalcyonTestSupport"),

        .testTarget(
            name: "HalcyonRuntimeTests", dependencies: ["HalcyonRuntime", "HalcyonTestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "HalcyonDomainTests", dependencies: ["HalcyonDomain", "HalcyonRuntime"]),
        // The grammar alone: identifiers, refusals and their columns, presets, the grammar fuzzed.
        .testTarget(name: "HalcyonChainTests", dependencies: ["HalcyonChain", "HalcyonDomain", "HalcyonRuntime", "HalcyonTestSupport"]),
        .testTarget(
            name: "HalcyonImageTests",
            dependencies: [
                "HalcyonImage", "HalcyonChain", "HalcyonDomain", "HalcyonRuntime", "HalcyonSamples", "HalcyonQualityReference", "HalcyonTestSupport",
                "CMagickWand", "CImageCodecs",
            ]),
        .testTarget(
            name: "HalcyonStoreTests", dependencies: ["HalcyonStore", "HalcyonDomain", "HalcyonRuntime", "HalcyonS3", "HalcyonTestSupport"]),
        // SigV4 against AWS's published vectors (Tests/Fixtures/sigv4), the client against SeaweedFS.
        .testTarget(name: "HalcyonS3Tests", dependencies: ["HalcyonS3", "HalcyonDomain", "HalcyonRuntime", "HalcyonTestSupport"]),
        .testTarget(
            name: "HalcyonFetchTests",
            dependencies: [
                "HalcyonFetch", "HalcyonDomain", "HalcyonRuntime", "HalcyonTestSupport", "HalcyonImage", "HalcyonSamples", "HalcyonStore",
                "HalcyonS3",
            ]),
        .testTarget(
            name: "HalcyonQueueTests",
            dependencies: [
                "HalcyonQueue", "HalcyonDomain", "HalcyonRuntime", "HalcyonTestSupport", "HalcyonBacklog",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(name: "HalcyonEmbeddedTests", dependencies: ["HalcyonEmbedded", "HalcyonQueue", "HalcyonRuntime", "HalcyonTestSupport"]),
        // The bench's parts, and `halcyon bench` run end to end.
        .testTarget(
            name: "HalcyonBenchTests",
            dependencies: [
                "HalcyonBench", "HalcyonDomain", "HalcyonQueue", "HalcyonRuntime", "HalcyonSamples", "HalcyonHosts", "HalcyonTestSupport",
            ]),
        .testTarget(
            name: "HalcyonQualityReferenceTests",
            dependencies: ["HalcyonQualityReference", "HalcyonDomain", "HalcyonImage", "HalcyonSamples", "HalcyonTestSupport"]),
        .testTarget(name: "HalcyonBacklogTests", dependencies: ["HalcyonBacklog", "HalcyonQueue", "HalcyonTestSupport"]),
        .testTarget(
            name: "HalcyonHostsTests", dependencies: ["HalcyonHosts", "HalcyonEmbedded", "HalcyonRuntime", "HalcyonTestSupport"]),
        .testTarget(
            name: "HalcyonDashboardTests",
            dependencies: [
                "HalcyonDashboard", "HalcyonDomain", "HalcyonRuntime", "HalcyonHTTP", "HalcyonS3", "HalcyonQueue", "HalcyonStore", "HalcyonImage",
                "HalcyonSamples", "HalcyonTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The `halcyon` binary's commands and options (Sources/HalcyonCommands, HalcyonCLI), run as users run them.
        .testTarget(name: "HalcyonCLITests", dependencies: ["HalcyonQueue", "HalcyonRuntime", "HalcyonTestSupport"]),
        // The worker's parts, and real `halcyon work` processes claiming, processing and recording jobs.
        .testTarget(
            name: "HalcyonWorkerTests",
            dependencies: [
                "HalcyonWorker", "HalcyonCommands", "HalcyonQueue", "HalcyonDomain", "HalcyonRuntime", "HalcyonImage", "HalcyonStore", "HalcyonS3",
                "HalcyonFetch", "HalcyonEmbedded", "HalcyonSamples", "HalcyonHosts", "HalcyonCLI",
                "HalcyonTestSupport", .product(name: "Prometheus", package: "swift-prometheus"), .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        .testTarget(name: "HalcyonFuzzTests", dependencies: ["HalcyonFuzz"]),
        // The span exporter against an OTLP receiver that decodes with OpenTelemetry's own definitions.
        .testTarget(
            name: "HalcyonTracingTests",
            dependencies: [
                "HalcyonTracing", "HalcyonDomain", "HalcyonRuntime", "HalcyonTestSupport", .product(name: "Logging", package: "swift-log"),
            ]),
        // The documentation's runnable examples, the CLI reference's freshness and the install.
        .testTarget(name: "HalcyonDocsTests", dependencies: ["HalcyonRuntime", "HalcyonDemo", "HalcyonEmbedded", "HalcyonTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// The fuzz targets' executables, `Fuzz<Name>` (Sources/Fuzz<Name>/Fuzz<Name>.swift), one per target of HalcyonFuzz.
package.targets += ["Chain", "Options", "Source", "Header", "Exif", "Direct"].map {
    .executableTarget(name: "Fuzz\($0)", dependencies: ["HalcyonFuzz"])
}

// Every file imports the modules whose members it uses (extensions included), so that each
// target's dependencies are what its files use — checked by the compiler and scripts/check-imports.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("MemberImportVisibility")]
}

// ImageMagick's include paths (`magickIncludes`) on the targets that load MagickWand's headers, and
// on no other: those that depend on CMagickWand, directly or through other targets. HalcyonImage
// imports CMagickWand `internal`ly, but a module not built for library evolution exposes all its
// imports: a module importing HalcyonImage, or importing a module that imports it (HalcyonWorker,
// HalcyonFuzz, HalcyonDemo, …), loads CMagickWand too, in debug and release builds alike. Without
// the paths such a module finds the headers only if the clang module cache already holds them,
// built by another target (a clean build then fails or not depending on build order). HalcyonChain,
// the dashboard and the modules that never reach ImageMagick build without them.
let magickDependents: Set<String> = {
    func dependencies(_ target: Target) -> [String] {
        target.dependencies.compactMap {
            switch $0 {
            case .targetItem(let name, _), .byNameItem(let name, _): name
            default: nil
            }
        }
    }
    var found: Set<String> = ["CMagickWand"]
    while true {
        let more = package.targets.filter { !found.contains($0.name) && dependencies($0).contains(where: found.contains) }
        if more.isEmpty { return found.subtracting(["CMagickWand"]) }
        found.formUnion(more.map(\.name))
    }
}()
for target in package.targets where magickDependents.contains(target.name) && target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + magickIncludes
}
