import Foundation
import HalcyonDemo
import HalcyonEmbedded
import HalcyonTestSupport
import Testing

/// The repository's checkout, found from this file.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// README.md and every page under docs/ that has runnable examples (the generated CLI reference has none).
enum DocPages {
    static func all() throws -> [DocPage] {
        var paths = ["README.md"]
        let docs = repositoryRoot.appendingPathComponent("docs")
        if let walker = FileManager.default.enumerator(atPath: docs.path) {
            for case let file as String in walker where file.hasSuffix(".md") { paths.append("docs/\(file)") }
        }
        return try paths.sorted().map { path in
            try DocParser.page(String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8), path: path)
        }
    }

    static var runnable: [DocPage] { ((try? all()) ?? []).filter { !$0.examples.isEmpty } }
}

/// Runs every example the documentation marks runnable, page by page, against the real binary
/// (found on `PATH`, as a user runs it) and a real database, and compares what it prints with
/// the output the page shows.
@Suite(.enabled(if: TestEnvironment.available, "needs scripts/test (PostgreSQL, binary)"), .processes(2))
struct DocExamplesTests {
    @Test func everyPageParses() throws {
        let pages = try DocPages.all()
        let count = pages.reduce(0) { $0 + $1.examples.count }
        print("doc examples: \(count) runnable in \(pages.filter { !$0.examples.isEmpty }.count) pages")
        #expect(pages.contains { $0.path == "README.md" && !$0.examples.isEmpty }, "README's tour has runnable examples")
    }

    // One page at a time: each starts workers and databases of its own, and the rest of the suite
    // is running beside it on two cores.
    @Test(.serialized, arguments: DocPages.runnable)
    func examplesRun(_ page: DocPage) async throws {
        let started = ContinuousClock.now
        let run = try await PageRun(page)
        let prepared = ContinuousClock.now - started
        var slowest: (Duration, Int) = (.zero, 0)
        defer {
            let took = ContinuousClock.now - started
            print("doc examples: \(page.path): \(page.examples.count) in \(took) (set-up \(prepared), slowest #\(slowest.1) \(slowest.0))")
        }
        for (n, example) in page.examples.enumerated() {
            let began = ContinuousClock.now
            let (status, output) = try await run.execute(example)
            if ContinuousClock.now - began > slowest.0 { slowest = (ContinuousClock.now - began, n + 1) }
            #expect(
                status == example.expectedExit,
                "\(example): exited \(status), expected \(example.expectedExit)\n--- code ---\n\(example.code)\n--- output ---\n\(output)")
            if let expected = example.expectedOutput {
                #expect(
                    OutputPattern.matches(expected: expected, actual: output),
                    "\(example): the output differs from the page\n--- code ---\n\(example.code)\n--- expected ---\n\(expected)\n--- actual ---\n\(output)"
                )
            }
            if status != example.expectedExit { break }  // later examples build on this one
        }
        await run.finish()
    }
}

/// One page's run: a directory of its own holding the demo's sample images, a database of its
/// own (or the embedded cluster), and shell state carried from one example to the next.
final class PageRun: Sendable {
    let page: DocPage
    let directory: URL
    let state: URL
    let environment: [String: String]

    /// The demo's sample images, made once per test run.
    static let samples: URL? = {
        guard let dir = try? TestEnvironment.temporaryDirectory("doc-samples") else { return nil }
        let images = dir.appendingPathComponent("images")
        return (try? Demo.generateSamples(in: images)) != nil ? images : nil
    }()

    init(_ page: DocPage) async throws {
        self.page = page
        let name = page.path.replacingOccurrences(of: "/", with: "-")
        directory = try TestEnvironment.temporaryDirectory("doc-\(name)")
        state = try TestEnvironment.temporaryDirectory("doc-state-\(name)")
        let samples = try #require(Self.samples, "the sample images could not be generated")
        let images = directory.appendingPathComponent(".halcyon/demo/images")
        try FileManager.default.createDirectory(at: images.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: samples, to: images)
        try directory.path.write(to: state.appendingPathComponent("cwd"), atomically: true, encoding: .utf8)

        var bin = URL(fileURLWithPath: TestEnvironment.binary).deletingLastPathComponent().path
        // `python3` is scripts/test's venv (psycopg, OpenTelemetry's SDK), as an application's would be.
        if let python = ProcessInfo.processInfo.environment["HALCYON_TEST_PYTHON"] {
            bin += ":" + URL(fileURLWithPath: python).deletingLastPathComponent().path
        }
        // Nothing of the test run's own: no HALCYON_MIGRATIONS (the binary finds its resources
        // itself), no PG* variables.
        var env = [
            "PATH": "\(bin):/usr/local/bin:/usr/bin:/bin", "HOME": directory.path, "LANG": "C.UTF-8", "TERM": "dumb",
            "USER": "root",
        ]
        // What scripts/test looks for in the processes that outlive the run.
        env["HALCYON_TEST_RUN"] = ProcessInfo.processInfo.environment["HALCYON_TEST_RUN"]
        if !page.directives.contains(.embedded) {
            env["DATABASE_URL"] = try await TestDatabase.create(migrated: !page.directives.contains(.unmigrated)).conninfo
        }
        environment = env
        if page.directives.contains(.afterDemo) { try await runDemo() }
    }

    /// `halcyon demo` in the page's directory, as the front page tells a newcomer to run it first.
    private func runDemo() async throws {
        let output = state.appendingPathComponent("demo.out")
        let pid = try Subprocess.spawn(
            "/usr/bin/timeout", ["--kill-after=10", "600", "/bin/bash", "-c", "cd '\(directory.path)' && halcyon demo"], outputPath: output.path,
            environment: environment)
        let status = await Self.exitStatus(of: pid)
        try #require(
            status == 0, "halcyon demo exited \(status) before \(page.path)'s examples:\n\((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
    }

    /// Runs one example; returns its exit status and combined output.
    func execute(_ example: DocExample) async throws -> (Int32, String) {
        let body: String
        switch example.language {
        case .sh:
            body = example.code
        case .sql:
            let file = state.appendingPathComponent("example-\(example.line).sql")
            try example.code.write(to: file, atomically: true, encoding: .utf8)
            body = "psql \"${DATABASE_URL:-$(halcyon embedded url)}\" -X -q -v ON_ERROR_STOP=1 -f '\(file.path)'"
        case .python:
            let file = state.appendingPathComponent("example-\(example.line).py")
            try example.code.write(to: file, atomically: true, encoding: .utf8)
            body = "python3 '\(file.path)'"
        case .go:
            // A program of its own, built in GOPATH mode against the libraries Debian installs
            // (scripts/setup), with its build cache in the page's state.
            let program = state.appendingPathComponent("example-\(example.line)-go")
            try FileManager.default.createDirectory(at: program, withIntermediateDirectories: true)
            try example.code.write(to: program.appendingPathComponent("main.go"), atomically: true, encoding: .utf8)
            body = """
                (cd '\(program.path)' && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE='\(state.path)/gocache' GOFLAGS= go run main.go)
                """
        }
        let q = state.path
        let script = """
            set -euo pipefail
            if [ -f '\(q)/env' ]; then source '\(q)/env'; fi
            cd "$(cat '\(q)/cwd')"
            trap 'export -p | grep -vE "^declare -x (PWD|OLDPWD|SHLVL|_)=" > "\(q)/env"; pwd > "\(q)/cwd"' EXIT
            \(body)
            """
        let file = state.appendingPathComponent("example-\(example.line).sh")
        try script.write(to: file, atomically: true, encoding: .utf8)
        let outputFile = state.appendingPathComponent("example-\(example.line).out")
        // timeout(1) signals its whole process group: a worker an example started goes with it.
        let pid = try Subprocess.spawn(
            "/usr/bin/timeout", ["--kill-after=10", "300", "/bin/bash", file.path], outputPath: outputFile.path,
            environment: environment)
        let status = await Self.exitStatus(of: pid)
        return (status, (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "")
    }

    /// Stops the page's embedded cluster, if it started one.
    func finish() async {
        guard page.directives.contains(.embedded) else { return }
        let pid = try? Subprocess.spawn(
            "/bin/bash", ["-c", "cd '\(directory.path)' && halcyon embedded stop"],
            outputPath: state.appendingPathComponent("stop.out").path, environment: environment)
        if let pid { _ = await Self.exitStatus(of: pid) }
    }

    /// Waits without holding a thread of the cooperative pool.
    static func exitStatus(of pid: pid_t) async -> Int32 {
        while true {
            if let status = Subprocess.status(of: pid, block: false) { return status }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}
