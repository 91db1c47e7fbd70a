import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonCore
import HalcyonImage

struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a processor chain: print its canonical identifier (exit 0) or the error (exit 1).")
    @Argument(help: "The chain, e.g. 'resize(320x320, mode=fill) |> format(jpeg, quality=82)'.")
    var chain: String

    func run() async throws {
        do {
            print(try ProcessorChain.parse(chain).identifier)
        } catch {
            printError("\(error)")
            throw ExitCode(1)
        }
    }
}
