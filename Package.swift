// swift-tools-version:6.0
import PackageDescription

// Halcyon: a batch image pipeline worker fed by a PostgreSQL job queue.
// One library module per concern (see ../shared/ARCHITECTURE.md); thin C shims under Sources/C*.
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
        .executable(name: "halcyon", targets: ["halcyon"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
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
            name: "CImageCodecs", cSettings: [.unsafeFlags(["-O2"])], linkerSettings: [.linkedLibrary("jpeg"), .linkedLibrary("png16")]),

        // Shared vocabulary: errors with categories, durations, job options, blocking-call offload.
        .target(
            name: "HalcyonCore",
            dependencies: [
                "CMalloc", "CCrypto", .product(name: "Logging", package: "swift-log"),
            ]),
        // PostgreSQL: connection, migrations, the job queue (claim, lease, complete, rescue).
        // Its SQL is in Queries/*.sql, embedded in the binary (no resource bundle to install).
        .target(name: "HalcyonQueue", dependencies: ["HalcyonCore", "CLibPQ"], resources: [.embedInCode("Queries")]),
        // Sources and downloads.
        .target(name: "HalcyonFetch", dependencies: ["HalcyonCore", "CCurl"]),
        // Chain grammar, processors and MagickWand.
        .target(name: "HalcyonImage", dependencies: ["HalcyonCore", "CMagickWand", "CImageCodecs"], swiftSettings: magickIncludes),
        // Content-addressed disk store.
        .target(name: "HalcyonStore", dependencies: ["HalcyonCore"]),
        // The worker runtime: claim loop, slots, heartbeat, rescuer, graceful stop.
        .target(
            name: "HalcyonWorker",
            dependencies: [
                "HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonImage", "HalcyonStore",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),

        // The operators' web dashboard (`halcyon dashboard`): pages and JSON over the queue and the store.
        .target(
            name: "HalcyonDashboard",
            dependencies: [
                "HalcyonCore", "HalcyonQueue", "HalcyonImage", "HalcyonStore", .product(name: "Logging", package: "swift-log"),
            ]),

        // Not what a worker runs: the embedded PostgreSQL cluster (the CLI's default database,
        // and the demo's, the bench's and the tests'), sample images, the CLI's shared options,
        // and the bench and demo commands.
        .target(name: "HalcyonEmbedded", dependencies: ["HalcyonCore", "HalcyonQueue"]),
        .target(name: "HalcyonSamples", dependencies: ["HalcyonCore", "HalcyonImage", "CMagickWand"], swiftSettings: magickIncludes),
        .target(
            name: "HalcyonCLI",
            dependencies: [
                "HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonEmbedded",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .target(
            name: "HalcyonBench",
            dependencies: [
                "HalcyonCLI", "HalcyonCore", "HalcyonQueue", "HalcyonImage", "HalcyonStore", "HalcyonEmbedded", "HalcyonSamples", "CMagickWand",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ], resources: [.embedInCode("Queries")], swiftSettings: magickIncludes),
        .target(
            name: "HalcyonDemo",
            dependencies: [
                "HalcyonCLI", "HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonImage", "HalcyonStore", "HalcyonWorker", "HalcyonEmbedded",
                "HalcyonSamples",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "halcyon",
            dependencies: [
                "HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonImage", "HalcyonStore", "HalcyonWorker",
                "HalcyonCLI", "HalcyonEmbedded", "HalcyonBench", "HalcyonDemo", "HalcyonDashboard",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),

        // Fuzzing (scripts/fuzz, Tests/Fixtures/fuzz/README.md): each parser's entry for libFuzzer, one
        // executable per target; never linked into `halcyon`. Built as usual, each executable runs the
        // files named on its command line once; scripts/fuzz builds one with -sanitize=fuzzer.
        .target(name: "HalcyonFuzz", dependencies: ["HalcyonCore", "HalcyonImage", "HalcyonFetch"]),

        // Helpers for the integration tests: throwaway databases, the origin, worker processes.
        .target(
            name: "HalcyonTestSupport", dependencies: ["HalcyonCore", "HalcyonQueue", "HalcyonFetch", "HalcyonEmbedded", "HalcyonSamples"],
            path: "Tests/HalcyonTestSupport"),

        .testTarget(name: "HalcyonCoreTests", dependencies: ["HalcyonCore"]),
        .testTarget(
            name: "HalcyonImageTests", dependencies: ["HalcyonImage", "HalcyonCore", "HalcyonSamples", "HalcyonBench", "HalcyonTestSupport"]),
        .testTarget(name: "HalcyonStoreTests", dependencies: ["HalcyonStore", "HalcyonCore"]),
        .testTarget(
            name: "HalcyonFetchTests",
            dependencies: [
                "HalcyonFetch", "HalcyonCore", "HalcyonTestSupport", "HalcyonImage", "HalcyonSamples", "HalcyonStore",
            ]),
        .testTarget(name: "HalcyonQueueTests", dependencies: ["HalcyonQueue", "HalcyonCore", "HalcyonTestSupport", "HalcyonBench"]),
        .testTarget(name: "HalcyonEmbeddedTests", dependencies: ["HalcyonEmbedded", "HalcyonQueue", "HalcyonCore", "HalcyonTestSupport"]),
        .testTarget(
            name: "HalcyonBenchTests", dependencies: ["HalcyonBench", "HalcyonImage", "HalcyonCore", "HalcyonSamples", "HalcyonTestSupport"]),
        .testTarget(
            name: "HalcyonDashboardTests",
            dependencies: [
                "HalcyonDashboard", "HalcyonQueue", "HalcyonCore", "HalcyonStore", "HalcyonImage", "HalcyonSamples", "HalcyonTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "HalcyonWorkerTests",
            dependencies: [
                "HalcyonWorker", "HalcyonQueue", "HalcyonCore", "HalcyonImage", "HalcyonStore", "HalcyonEmbedded", "HalcyonSamples",
                "HalcyonTestSupport",
            ]),
        .testTarget(name: "HalcyonFuzzTests", dependencies: ["HalcyonFuzz"]),
        // The documentation's runnable examples, the CLI reference's freshness and the install.
        .testTarget(name: "HalcyonDocsTests", dependencies: ["HalcyonDemo", "HalcyonEmbedded", "HalcyonTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// The fuzz targets' executables, `Fuzz<Name>` (Sources/Fuzz<Name>/Fuzz<Name>.swift), one per target of HalcyonFuzz.
package.targets += ["Chain", "Options", "Source", "Header", "Exif", "Direct", "HTTP"].map {
    .executableTarget(name: "Fuzz\($0)", dependencies: ["HalcyonFuzz"])
}
