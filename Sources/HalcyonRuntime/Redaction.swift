import Foundation
import Synchronization

/// Secrets kept out of what Halcyon shows: connection strings and URLs with their passwords
/// masked, and a process-wide list of the secret values it was given, which every log line
/// and every error a command prints is scrubbed of (`LogSecrets`).
public enum Redaction {
    /// What a secret is replaced with.
    public static let mask = "***"

    /// Connection-string keywords whose values are secrets (libpq's `password` and
    /// `sslpassword`).
    static let secretKeywords: Set<String> = ["password", "sslpassword"]

    /// A libpq connection string or URI with its passwords masked: `postgresql://u:***@h/db`,
    /// `host=h password=*** dbname=d`, `…?password=***`. Anything else is returned as
    /// `url(_:)` would.
    public static func conninfo(_ text: String) -> String {
        if isURI(text) { return uri(text).redacted }
        if text.contains("://") { return url(text) }
        return keywordValue(text).redacted
    }

    /// The secret values a connection string or URI holds (its passwords, as written and as
    /// libpq reads them), for scrubbing text that may quote them (libpq's messages do).
    public static func conninfoSecrets(_ text: String) -> [String] {
        let found = isURI(text) ? uri(text).secrets : text.contains("://") ? [] : keywordValue(text).secrets
        return Array(Set(found.filter { !$0.isEmpty }))
    }

    /// A URL with its user's password masked (`https://u:***@h/`) and the values of query
    /// parameters that carry credentials (`X-Amz-Signature`, `X-Amz-Security-Token`,
    /// `X-Amz-Credential`, `password`, `token`, `secret`, `sig`, `signature`) masked.
    /// Text that is not a URL is returned unchanged.
    public static func url(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://") else { return text }
        var result = String(text[..<schemeEnd.upperBound])
        let rest = text[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            if let colon = userinfo.firstIndex(of: ":") {
                result += userinfo[..<colon] + ":" + mask
            } else {
                result += userinfo
            }
            result += authority[at...]
        } else {
            result += authority
        }
        var tail = rest[authorityEnd...]
        guard let question = tail.firstIndex(of: "?") else { return result + tail }
        result += tail[...question]
        tail = tail[tail.index(after: question)...]
        let fragment = tail.firstIndex(of: "#")
        let query = tail[..<(fragment ?? tail.endIndex)]
        result += query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<equals].lowercased()
            return credentialParameters.contains(name) || secretKeywords.contains(name) ? pair[..<equals] + "=" + mask : String(pair)
        }.joined(separator: "&")
        if let fragment { result += tail[fragment...] }
        return result
    }

    /// Query parameters (lower-cased) whose values are credentials.
    static let credentialParameters: Set<String> = [
        "x-amz-signature", "x-amz-security-token", "x-amz-credential", "token", "secret", "sig", "signature",
    ]

    // MARK: Connection strings

    static func isURI(_ text: String) -> Bool {
        let lower = text.prefix(13).lowercased()
        return lower.hasPrefix("postgresql://") || lower.hasPrefix("postgres://")
    }

    /// A URI (`postgresql://[user[:password]@][hosts][/dbname][?params]`), redacted, and its
    /// secrets. libpq ends the user part at the first `@` before any `/`.
    static func uri(_ text: String) -> (redacted: String, secrets: [String]) {
        let schemeEnd = text.range(of: "://")!.upperBound
        var redacted = String(text[..<schemeEnd])
        var secrets: [String] = []
        var rest = text[schemeEnd...]
        if let stop = rest.firstIndex(where: { $0 == "@" || $0 == "/" }), rest[stop] == "@" {
            let userinfo = rest[..<stop]
            if let colon = userinfo.firstIndex(of: ":") {
                let password = String(userinfo[userinfo.index(after: colon)...])
                secrets += [password, password.removingPercentEncoding ?? password]
                redacted += userinfo[...colon] + mask
            } else {
                redacted += userinfo
            }
            redacted += "@"
            rest = rest[rest.index(after: stop)...]
        }
        guard let question = rest.firstIndex(of: "?") else { return (redacted + rest, secrets) }
        redacted += rest[...question]
        let pairs = rest[rest.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false)
        redacted += pairs.map { pair -> String in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let name = String(pair[..<equals]).removingPercentEncoding ?? String(pair[..<equals])
            guard secretKeywords.contains(name.lowercased()) else { return String(pair) }
            let value = String(pair[pair.index(after: equals)...])
            secrets += [value, value.removingPercentEncoding ?? value]
            return pair[..<equals] + "=" + mask
        }.joined(separator: "&")
        return (redacted, secrets)
    }

    /// A keyword/value string (`host=h password='a b' dbname=d`), redacted, and its secrets.
    /// Values are single-quoted (with `\'` and `\\` escapes) or run to the next whitespace.
    static func keywordValue(_ text: String) -> (redacted: String, secrets: [String]) {
        let chars = Array(text)
        var out = "", secrets: [String] = []
        var i = 0
        while i < chars.count {
            // Whitespace between pairs, kept as it is.
            while i < chars.count, chars[i].isWhitespace {
                out.append(chars[i])
                i += 1
            }
            guard i < chars.count else { break }
            // The keyword, up to `=` or whitespace.
            let keywordStart = i
            while i < chars.count, chars[i] != "=", !chars[i].isWhitespace { i += 1 }
            let keyword = String(chars[keywordStart..<i])
            out += keyword
            // Spaces around `=`.
            var j = i
            while j < chars.count, chars[j].isWhitespace { j += 1 }
            guard j < chars.count, chars[j] == "=" else { continue }  // no value: libpq refuses it; keep scanning
            out += String(chars[i...j])
            i = j + 1
            while i < chars.count, chars[i].isWhitespace {
                out.append(chars[i])
                i += 1
            }
            // The value, quoted or bare.
            let valueStart = i
            var value = ""
            if i < chars.count, chars[i] == "'" {
                i += 1
                while i < chars.count, chars[i] != "'" {
                    if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                    value.append(chars[i])
                    i += 1
                }
                if i < chars.count { i += 1 }  // the closing quote
            } else {
                while i < chars.count, !chars[i].isWhitespace {
                    if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                    value.append(chars[i])
                    i += 1
                }
            }
            let written = String(chars[valueStart..<i])
            if secretKeywords.contains(keyword.lowercased()) {
                out += mask
                secrets += [written, value]
            } else {
                out += written
            }
        }
        return (out, secrets)
    }
}

/// The secret values this process was given (a database password, webhook secrets, dashboard
/// tokens, AWS keys), replaced by `***` in every log line `HalcyonLogHandler` writes and every
/// error a command prints: a safety net under the redacted descriptions, for a path that
/// quotes a secret nobody foresaw (a library's error message echoing its input).
///
/// Values shorter than `minimumLength` are not registered: masking every `abc` in every line
/// would garble the logs, and so short a value is no secret worth the name.
public enum LogSecrets {
    public static let minimumLength = 6
    private static let values = Mutex<[String]>([])

    /// Adds secret values (each, and its form after a `whsec_` prefix).
    public static func register(_ secrets: some Sequence<String>) {
        var add: [String] = []
        for secret in secrets {
            add.append(secret)
            if secret.hasPrefix("whsec_") { add.append(String(secret.dropFirst(6))) }
        }
        let usable = add.filter { $0.utf8.count >= minimumLength }
        guard !usable.isEmpty else { return }
        values.withLock { list in
            for value in usable where !list.contains(value) { list.append(value) }
            // Longest first, so a secret that contains another is masked whole.
            list.sort { $0.utf8.count > $1.utf8.count }
        }
    }

    /// The secrets of a connection string or URI (its passwords).
    public static func register(conninfo: String) {
        register(Redaction.conninfoSecrets(conninfo))
    }

    /// Registers what this process's environment and command line hold: `DATABASE_URL`'s and
    /// `--database-url`'s passwords, `PGPASSWORD`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    /// `HALCYON_WEBHOOK_SECRET` and `--webhook-secret`, the dashboard's tokens
    /// (`HALCYON_DASHBOARD_TOKEN`, `HALCYON_DASHBOARD_VIEWER_TOKEN`, `--auth-token`,
    /// `--viewer-token`).
    public static func registerProcess(
        environment: [String: String] = ProcessInfo.processInfo.environment, arguments: [String] = CommandLine.arguments
    ) {
        var plain: [String] = []
        for name in ["PGPASSWORD", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "HALCYON_DASHBOARD_TOKEN", "HALCYON_DASHBOARD_VIEWER_TOKEN"] {
            if let value = environment[name] { plain.append(value) }
        }
        if let secrets = environment["HALCYON_WEBHOOK_SECRET"] {
            plain += secrets.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init)
        }
        var conninfos = [environment["DATABASE_URL"]].compactMap { $0 }
        let options = ["--database-url", "--webhook-secret", "--auth-token", "--viewer-token"]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            for option in options {
                var value: String?
                if argument == option, index + 1 < arguments.count {
                    value = arguments[index + 1]
                } else if argument.hasPrefix(option + "=") {
                    value = String(argument.dropFirst(option.count + 1))
                }
                guard let value else { continue }
                if option == "--database-url" { conninfos.append(value) } else { plain.append(value) }
            }
            index += 1
        }
        register(plain)
        for conninfo in conninfos { register(conninfo: conninfo) }
    }

    /// `text` with every registered secret replaced by `***`.
    public static func scrub(_ text: String) -> String {
        let secrets = values.withLock { $0 }
        guard !secrets.isEmpty else { return text }
        var text = text
        for secret in secrets {
            if let masked = Redaction.masking(secret, in: text) { text = masked }
        }
        return text
    }
}

extension Redaction {
    /// `text` with every occurrence of `secret` replaced by `***`, or nil when there is none.
    /// Compared as UTF-8 bytes (a secret followed by a combining mark is still found), and
    /// cheap when there is nothing to replace.
    public static func masking(_ secret: String, in text: String) -> String? {
        let needle = Array(secret.utf8)
        guard let first = needle.first, text.utf8.count >= needle.count else { return nil }
        let haystack = Array(text.utf8)
        var out: [UInt8] = []
        var copied = 0, i = 0
        while i + needle.count <= haystack.count {
            if haystack[i] == first, haystack[i..<(i + needle.count)].elementsEqual(needle) {
                out += haystack[copied..<i]
                out += mask.utf8
                i += needle.count
                copied = i
            } else {
                i += 1
            }
        }
        guard copied > 0 else { return nil }
        out += haystack[copied...]
        return String(decoding: out, as: UTF8.self)
    }
}
