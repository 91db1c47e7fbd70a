import ArgumentParser
import Foundation
import HalcyonCLI
import HalcyonDomain
import HalcyonFetch
import HalcyonWorker

/// The webhook options `halcyon work` and `halcyon deliver` share; they fill a
/// `WebhookConfiguration` (whose defaults they show). Its description hides the secrets (no custom
/// mirror: ArgumentParser finds the options through the type's own).
struct WebhookOptions: ParsableArguments, CustomStringConvertible, CustomDebugStringConvertible {
    @Option(
        name: .customLong("webhook-secret"),
        help: ArgumentHelp(
            "Key of the webhooks' signatures (Standard Webhooks' webhook-signature; the first also signs X-Halcyon-Signature); a whsec_<base64> secret signs with the bytes it encodes. Repeatable, up to \(WebhookConfiguration.maxSecrets): each signs, so receivers holding the old or the new key verify during a rotation. Also HALCYON_WEBHOOK_SECRET (space-separated). Without one, webhooks are not signed."
        )
    )
    var secrets: [String] = []
    @Option(help: ArgumentHelp(WebhookConfiguration.Settings.timeout.help))
    var webhookTimeout = TimeSpanArgument(WebhookConfiguration.Settings.timeout.defaultValue)
    @Option(help: ArgumentHelp(WebhookConfiguration.Settings.maxAttempts.help))
    var webhookAttempts = WebhookConfiguration.Settings.maxAttempts.defaultValue

    var description: String { "WebhookOptions(secrets: \(secrets.count) redacted)" }
    var debugDescription: String { description }

    func validate() throws {
        do {
            try configuration().validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// `--webhook-secret`, else HALCYON_WEBHOOK_SECRET's space-separated secrets (of `environment`).
    func allSecrets(_ environment: [String: String]) -> [String] {
        if !secrets.isEmpty { return secrets }
        let env = environment["HALCYON_WEBHOOK_SECRET"] ?? ""
        return env.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init)
    }

    /// The configuration these options describe, with `environment`'s variables.
    func configuration(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> WebhookConfiguration {
        var webhooks = WebhookConfiguration()
        webhooks.secrets = allSecrets(environment)
        webhooks.timeout = webhookTimeout.duration
        webhooks.maxAttempts = webhookAttempts
        return webhooks
    }
}

/// `--allow-network`, shared by what connects out (downloads, webhook deliveries).
struct AllowNetworkOptions: ParsableArguments {
    @Option(
        name: .customLong("allow-network"),
        help:
            "A CIDR that downloads and webhook deliveries may connect to although it is internal, e.g. 10.1.0.0/16 or 127.0.0.1 (repeatable; also HALCYON_ALLOW_NETWORKS, comma-separated). Default: public addresses only."
    )
    var allowNetworks: [String] = []

    func validate() throws {
        for cidr in all() where CIDR(cidr) == nil { throw ValidationError("--allow-network '\(cidr)' is not an address or CIDR") }
    }

    /// The option's and HALCYON_ALLOW_NETWORKS's networks (of `environment`).
    func all(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        let env = (environment["HALCYON_ALLOW_NETWORKS"] ?? "").split(separator: ",")
        return (allowNetworks + env.map { $0.trimmingCharacters(in: .whitespaces) }).filter { !$0.isEmpty }
    }

    /// The address policy these networks make.
    func policy(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> AddressPolicy {
        AddressPolicy(allowed: all(environment).compactMap(CIDR.init))
    }
}
