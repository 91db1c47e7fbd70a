/// Halcyon's version, said in one place: what `halcyon --version` prints, the `User-Agent` of
/// its downloads, webhook deliveries and S3 requests, and the base of the Debian package's
/// version (`scripts/package-deb` asks the binary).
public enum HalcyonVersion {
    public static let string = "0.1.0"
}
