import HalcyonCommands

// `halcyon` with the suite's fault injection (`TestFault`): the crash and shutdown tests run it
// where they need image work to fail the way a C library can. Built with the tests
// (`swift build --build-tests`), or alone: `swift build --product halcyon-faults`. Never installed.
await Halcyon.main(chainStarted: TestFault.hook)
