import ArgumentParser
import Foundation
import HalcyonEmbedded
import HalcyonQueue

/// `--store`, else `HALCYON_STORE`, else `$HALCYON_HOME/store`.
package struct StoreOptions: ParsableArguments {
    package init() {}

    @Option(help: "Store root directory (default: HALCYON_STORE or $HALCYON_HOME/store).")
    package var store: String?

    package func root() -> URL {
        if let store { return URL(fileURLWithPath: store).standardizedFileURL }
        if let env = ProcessInfo.processInfo.environment["HALCYON_STORE"], !env.isEmpty {
            return URL(fileURLWithPath: env).standardizedFileURL
        }
        return EmbeddedCluster.defaultHome().appendingPathComponent("store")
    }
}
