import Foundation
import HalcyonRuntime

/// The headers that identify and sign one webhook delivery attempt.
///
/// [Standard Webhooks](https://www.standardwebhooks.com/): `webhook-id` (the same for every
/// attempt of one delivery: the job and the moment it finished, so a job retried and finished
/// again is a new message), `webhook-timestamp` (this attempt's, in seconds) and
/// `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">` — one such signature per
/// secret, space-separated, so that during a key rotation a receiver holding either key
/// verifies. A receiver checks a signature and that the timestamp is recent (the libraries allow
/// 5 minutes), so a captured delivery cannot be replayed later. A signing key is the secret's
/// bytes, or for a secret written `whsec_<base64>` (the spec's form) the bytes it encodes.
///
/// `X-Halcyon-Signature: sha256=<hex HMAC-SHA256 of the body>`, keyed by the first secret's
/// bytes, is sent as well, for receivers written against it; it signs the body only.
struct WebhookSignature: Sendable {
    /// The keys, in the order of the secrets.
    let keys: [[UInt8]]
    /// The first secret's bytes (`X-Halcyon-Signature`'s key).
    let legacyKey: [UInt8]

    static let prefix = "whsec_"
    /// The header carrying `sha256=<hex HMAC-SHA256 of the body>`.
    static let legacyHeader = "X-Halcyon-Signature"

    /// Nil when there is no secret, or a `whsec_` secret does not hold base64.
    init?(secrets: [String]) {
        guard let first = secrets.first else { return nil }
        var keys: [[UInt8]] = []
        for secret in secrets {
            guard let key = Self.key(secret) else { return nil }
            keys.append(key)
        }
        self.keys = keys
        legacyKey = Array(first.utf8)
    }

    /// The signing key of one secret.
    static func key(_ secret: String) -> [UInt8]? {
        guard secret.hasPrefix(prefix) else { return Array(secret.utf8) }
        var text = String(secret.dropFirst(prefix.count))
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), !data.isEmpty else { return nil }
        return Array(data)
    }

    /// The headers of one attempt.
    func headers(messageID: String, timestamp: Int, body: Data) -> [String: String] {
        let signed = Array(Data("\(messageID).\(timestamp).".utf8) + body)
        return [
            "webhook-signature": keys.map { "v1," + Data(Digest.hmacSHA256(key: $0, message: signed)).base64EncodedString() }
                .joined(separator: " "),
            Self.legacyHeader: "sha256=" + Digest.hmacSHA256Hex(key: legacyKey, message: Array(body)),
        ]
    }
}
