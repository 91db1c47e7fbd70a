import ArgumentParser
import Foundation
import HalcyonDomain
import HalcyonEmbedded
import HalcyonS3
import HalcyonStore

/// `--store`, else `HALCYON_STORE`, else `$HALCYON_HOME/store`.
package struct StoreOptions: ParsableArguments {
    package init() {}

    @Option(
        help: ArgumentHelp(
            "Where results are kept: a directory, or s3://BUCKET[/PREFIX] (default: HALCYON_STORE or $HALCYON_HOME/store).",
            discussion: """
                For s3://, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_REGION or \
                AWS_DEFAULT_REGION, and AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for a server other than AWS \
                give the credentials, region and endpoint.
                """))
    package var store: String?

    @Flag(
        inversion: .prefixedNo,
        help: ArgumentHelp(
            "With an s3:// store: address the bucket in the path (https://HOST/BUCKET/KEY) or as a host name (https://BUCKET.HOST/KEY).",
            discussion:
                "Default: HALCYON_S3_PATH_STYLE (1 or 0), else path-style for an endpoint given by address or localhost, host names otherwise."))
    package var s3PathStyle: Bool?

    /// The store's location (`environment`'s variables where no option says); a `scheme://` other than `s3://`, a bad bucket name or a bad S3
    /// variable is a `ValidationError` naming it.
    package func location(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> StoreLocation {
        let text = store ?? environment["HALCYON_STORE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let text else { return .directory(EmbeddedCluster.defaultHome().appendingPathComponent("store")) }
        do {
            var location = try StoreLocation(parsing: text, environment: environment)
            if let s3PathStyle, case .objectStore(var configuration) = location {
                configuration.pathStyle = s3PathStyle
                location = .objectStore(configuration)
            }
            return location
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The store itself (see `location()`).
    package func open() throws -> any ResultStore {
        do {
            return try location().open()
        } catch let error as HalcyonError {
            throw ValidationError(error.message)
        }
    }
}
