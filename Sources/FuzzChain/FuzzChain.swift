// The fuzz target `chain` (HalcyonFuzz/ChainFuzz.swift). Built by scripts/fuzz (-sanitize=fuzzer,
// -D HALCYON_FUZZING), libFuzzer's main calls LLVMFuzzerTestOneInput; built as usual, it is an
// ordinary executable that runs each file named on its command line once.
import HalcyonFuzz

#if HALCYON_FUZZING
/// libFuzzer's entry point: one input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzEntry.test(data, size, ChainFuzz.run)
}
#else
/// Replays the inputs named on the command line.
@main struct FuzzChain {
    static func main() { FuzzEntry.main("chain") }
}
#endif
