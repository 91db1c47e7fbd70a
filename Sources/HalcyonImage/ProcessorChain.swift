import HalcyonCore

/// A parsed, validated chain and its canonical identifier.
public struct ProcessorChain: Sendable {
    /// Every processor the grammar knows, by step name.
    static let registry: [String: any ImageProcessor.Type] = Dictionary(uniqueKeysWithValues: ([
        ResizeProcessor.self, FormatProcessor.self,
    ] as [any ImageProcessor.Type]).map { ($0.name, $0) })

    public var processors: [any ImageProcessor]

    /// The steps' identifiers joined by `|>`; empty for an empty chain.
    public var identifier: String { processors.map(\.identifier).joined(separator: "|>") }

    /// Parses chain text; `job.invalid_chain` naming the column on any error.
    public static func parse(_ text: String) throws(HalcyonError) -> ProcessorChain {
        do {
            return try parseOrThrow(text)
        } catch {
            throw error.halcyonError
        }
    }

    static func parseOrThrow(_ text: String) throws(ChainError) -> ProcessorChain {
        var processors: [any ImageProcessor] = []
        for step in try ChainGrammar.parse(text) {
            guard let type = registry[step.name] else {
                throw ChainError(position: step.position, found: "unknown step '\(step.name)'",
                                 expected: "one of \(registry.keys.sorted().joined(separator: ", "))")
            }
            processors.append(try type.init(step: step))
        }
        return ProcessorChain(processors: processors)
    }

    /// The result key: `cacheKey@identifier`, or just `cacheKey` for an empty chain.
    public func resultKey(cacheKey: String) -> String {
        let id = identifier
        return id.isEmpty ? cacheKey : "\(cacheKey)@\(id)"
    }

    /// The output encoding chosen by the last `format` step, if any.
    public var outputFormat: ImageFormat? {
        processors.compactMap { ($0 as? FormatProcessor)?.format.imageFormat }.last
    }

    /// The shrink-on-load hint: when the first pixel-changing step shrinks, the size the decoder
    /// may reduce to without losing what that step needs. Square on the larger side, so an EXIF
    /// rotation that swaps width and height still leaves enough pixels.
    var shrinkHint: Int? {
        for p in processors {
            if p is FormatProcessor { continue }
            guard let s = p as? any ShrinkingProcessor else { return nil }
            let need = s.minimumDecodeSize
            return max(need.width, need.height)
        }
        return nil
    }
}
