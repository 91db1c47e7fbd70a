import HalcyonDomain
import Testing

@testable import HalcyonChain
@testable import HalcyonImage

/// Every step of the grammar (HalcyonChain) has a processor here: `ProcessorChain` is built
/// from a parsed `Chain` without a cast that could trap, so a step type that forgot its
/// `ImageProcessor` conformance would fail jobs with `internal`, and this is what catches it.
@Suite struct ProcessorChainTests {
    @Test func everyRegisteredStepIsAnImageProcessor() throws {
        #expect(Chain.registry.count >= 22)
        for (name, type) in Chain.registry {
            #expect(type is any ImageProcessor.Type, "the step '\(name)' (\(type)) has no ImageProcessor conformance")
        }
        // One of each, through the parser: the processors are the chain's steps, in order
        // (`breakpoints` ends a chain without a `format` step: on its own).
        let text = Chain.registry.keys.sorted().filter { $0 != BreakpointsStep.name }.map(Self.example).joined(separator: " |> ")
        let chain = try ProcessorChain.parse(text)
        #expect(chain.processors.count == Chain.registry.count - 1)
        #expect(chain.processors.map(\.identifier) == chain.chain.steps.map(\.identifier))
        let set = try ProcessorChain.parse("resize(400x400) |> " + Self.example(BreakpointsStep.name))
        #expect(set.processors.last is BreakpointsStep && set.chain.breakpoints != nil)
    }

    /// A step without a processor is refused with `internal`, not a trap.
    @Test func aStepWithoutAProcessorIsAnInternalError() throws {
        struct Unprocessed: ChainStepDefinition {
            static let name = "unprocessed"
            init(step: ChainStep) throws(ChainError) {}
            var identifier: String { Self.name }
        }
        #expect(!(Unprocessed.self is any ImageProcessor.Type))
        let chain = Chain(steps: [try Unprocessed(step: ChainStep(name: "unprocessed", position: 1, arguments: []))])
        #expect {
            _ = try ProcessorChain(chain)
        } throws: { error in
            guard let error = error as? HalcyonError else { return false }
            return error.code == .internal && error.message.contains("'unprocessed' has no processor")
        }
    }

    /// A step with its arguments, for a chain that names every step once.
    static func example(_ name: String) -> String {
        switch name {
        case "resize", "downsample", "crop", "pad", "extend": "\(name)(10x10)"
        case "blur", "sharpen", "rotate", "round_corner", "border": "\(name)(1)"
        case "overlay", "tint": "\(name)(red)"
        case "format": "format(png)"
        case "watermark": #"watermark("https://cdn.test/mark.png")"#
        default: name
        }
    }
}
