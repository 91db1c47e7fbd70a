import Foundation
import HalcyonStore

/// The headers that identify and sign one webhook delivery attempt.
///
/// [Standard Webhooks](https://www.standardwebhooks.com/): `webhook-id` (the same for every
/// attempt of one delivery: the job and the moment it finished, so a job retried and finished
/// again is a new message), `webhook-timestamp` (this attempt's, in seconds) and
/// `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`. A receiver checks the
/// signature and that the timestamp is recent (the libraries allow 5 minutes), so a captured
/// delivery cannot be replayed later. The signing key is the secret's bytes, or for a secret
/// written `whsec_<base64>` (the spec's form) the bytes it encodes.
///
/// `X-Halcyon-Signature: sha256=<hex HMAC-SHA256 of the body>` is sent as well, for receivers
/// written against it; it signs the body only.
struct WebhookSignature: Sendable {
    let key: [UInt8]
    let secret: String

    static let prefix = "whsec_"

    /// Nil when a `whsec_` secret does not hold base64.
    init?(secret: String) {
        self.secret = secret
        if secret.hasPrefix(Self.prefix) {
            var text = String(secret.dropFirst(Self.prefix.count))
            while text.count % 4 != 0 { text += "=" }
            guard let data = Data(base64Encoded: text), !data.isEmpty else { return nil }
            key = Array(data)
        } else {
            key = Array(secret.utf8)
        }
    }

    /// The headers of one attempt.
    func headers(messageID: String, timestamp: Int, body: Data) -> [String: String] {
        let signed = Data("\(messageID).\(timestamp).".utf8) + body
        return [
            "webhook-signature": "v1," + Data(Digest.hmacSHA256(key: key, message: signed)).base64EncodedString(),
            WebhookDeliverer.signatureHeader: "sha256=" + Digest.hmacSHA256Hex(key: Array(secret.utf8), message: body),
        ]
    }
}
