/// Told of each chunk one transfer receives, on the transfer's own (blocking) thread, before the
/// chunk is kept: the way a download's bytes count against a budget while they arrive, not only
/// once the body is whole. `received` may block the transfer until there is room.
public protocol TransferMeter: Sendable {
    /// `bytes` more arrived. False stops the transfer (its request was cancelled meanwhile).
    func received(_ bytes: Int) -> Bool
}
