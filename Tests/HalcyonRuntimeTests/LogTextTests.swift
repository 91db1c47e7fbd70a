import Foundation
import Logging
import Testing

@testable import HalcyonRuntime

/// The text log's escaping and the secrets every line is scrubbed of.
@Suite struct LogTextTests {
    @Test func controlCharactersAreEscaped() {
        #expect(LogText.escaped("plain text: ünïcödé ✓") == "plain text: ünïcödé ✓")
        #expect(LogText.escaped("a\nb\rc\td") == #"a\nb\rc\td"#)
        #expect(LogText.escaped("\u{1B}[31mred\u{1B}[0m") == #"\u001b[31mred\u001b[0m"#)
        #expect(LogText.escaped("\u{0}\u{7}\u{7F}\u{85}\u{9B}") == #"\u0000\u0007\u007f\u0085\u009b"#)
        #expect(LogText.escaped("x\u{2028}y\u{2029}z") == #"x\u2028y\u2029z"#)
        #expect(LogText.escaped("\u{202E}evil\u{202C}\u{2066}\u{2069}\u{200E}\u{200F}\u{61C}") == #"\u202eevil\u202c\u2066\u2069\u200e\u200f\u061c"#)
        // A backslash is escaped too, so an escape in the log is never the source's own text.
        #expect(LogText.escaped(#"C:\n"#) == #"C:\\n"#)
    }

    @Test func everyTextLineIsOneLineWithItsForgedTextEscaped() {
        let forged = "\n2026-11-27T12:00:00Z CRITICAL forged"
        let metadata: Logger.Metadata = ["source": "http://a/\(forged)", "key\nname": "k\r\u{2028}\u{1B}[2J"]
        let line = HalcyonLogHandler.line(
            time: "2026-11-27T00:00:00Z", level: .notice, message: "job failed\(forged)", label: "t", metadata: metadata, format: .text)
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{2028}" || $0 == "\u{1B}" }, "\(line)")
        #expect(
            line
                == #"2026-11-27T00:00:00Z NOTICE job failed\n2026-11-27T12:00:00Z CRITICAL forged key\nname=k\r\u2028\u001b[2J source=http://a/\n2026-11-27T12:00:00Z CRITICAL forged"#
        )
        let json = HalcyonLogHandler.line(
            time: "2026-11-27T00:00:00Z", level: .notice, message: "job failed\(forged)", label: "t", metadata: metadata, format: .json)
        #expect(!json.contains("\n") && !json.contains("\r"))
        guard case .object(let object)? = JSONValue.parse(json) else {
            Issue.record("not JSON: \(json)")
            return
        }
        #expect(object["msg"]?.stringValue == "job failed\(forged)")
        #expect(object["source"]?.stringValue == "http://a/\(forged)")
    }

    @Test func registeredSecretsAreMaskedInBothFormats() {
        let secret = "log-secret-\(UUID().uuidString)"
        LogSecrets.register([secret, "short"])
        for format in [LogFormat.text, .json] {
            let line = HalcyonLogHandler.line(
                time: "t", level: .error, message: "failed with \(secret)", label: "t", metadata: ["error": "key \(secret) refused"], format: format)
            #expect(!line.contains(secret) && line.contains("failed with ***") && line.contains("key *** refused"), "\(line)")
        }
        // Too short to be masked in any text (it would garble every line).
        #expect(LogSecrets.scrub("a short line") == "a short line")
    }

    @Test func theProcessSecretsAreFoundInTheEnvironmentAndTheCommandLine() {
        let id = UUID().uuidString
        LogSecrets.registerProcess(
            environment: [
                "DATABASE_URL": "postgresql://u:env-db-\(id)@h/d", "AWS_SECRET_ACCESS_KEY": "aws-secret-\(id)",
                "AWS_SESSION_TOKEN": "aws-token-\(id)", "HALCYON_WEBHOOK_SECRET": "hook-one-\(id) whsec_aG9vay10d28tAAAA\(id.prefix(4))",
                "HALCYON_DASHBOARD_TOKEN": "dash-\(id)", "PGPASSWORD": "pgpassword-\(id)", "HOME": "/root",
            ],
            arguments: [
                "halcyon", "work", "--database-url", "host=h password='arg db \(id)'", "--webhook-secret=arg-hook-\(id)", "--auth-token",
                "arg-auth-\(id)",
            ])
        for secret in [
            "env-db-\(id)", "aws-secret-\(id)", "aws-token-\(id)", "hook-one-\(id)", "aG9vay10d28tAAAA\(id.prefix(4))", "dash-\(id)",
            "pgpassword-\(id)", "arg db \(id)", "arg-hook-\(id)", "arg-auth-\(id)",
        ] {
            #expect(LogSecrets.scrub("[\(secret)]") == "[***]", "\(secret)")
        }
        #expect(LogSecrets.scrub("/root") == "/root")
    }
}

@Suite struct RedactionTests {
    @Test(arguments: [
        ("postgresql://halcyon:s3cret@db.example/halcyon", "postgresql://halcyon:***@db.example/halcyon"),
        ("postgres://u:p%40ss@h1:5432,h2:5433/d?sslmode=require", "postgres://u:***@h1:5432,h2:5433/d?sslmode=require"),
        ("postgresql://u@h/d?password=qp&application_name=x", "postgresql://u@h/d?password=***&application_name=x"),
        ("postgresql://u:pw@[::1", "postgresql://u:***@[::1"),
        ("postgresql:///d?host=/run/pg&sslpassword=kp", "postgresql:///d?host=/run/pg&sslpassword=***"),
        ("postgresql://h/d", "postgresql://h/d"),
        ("host=h password=s3cret dbname=d", "host=h password=*** dbname=d"),
        ("host=h password = 's3 cr\\'et' dbname=d", "host=h password = *** dbname=d"),
        ("password=x", "password=***"),
        ("host=/tmp port=5432 user=postgres", "host=/tmp port=5432 user=postgres"),
        ("", ""),
    ])
    func connectionStringsLoseTheirPasswords(text: String, shown: String) {
        #expect(Redaction.conninfo(text) == shown)
    }

    @Test func maskingComparesBytes() {
        #expect(Redaction.masking("s3cret", in: "a s3cret, and s3cret again") == "a ***, and *** again")
        #expect(Redaction.masking("s3cret", in: "nothing here") == nil)
        #expect(Redaction.masking("s3cret", in: "s3cre") == nil)
        // A combining mark after the secret makes another Character, not other bytes.
        #expect(Redaction.masking("s3cret", in: "[s3cret\u{301}]") == "[***\u{301}]")
        #expect(Redaction.masking("pässwörd", in: "x=pässwörd") == "x=***")
    }

    @Test func theSecretsOfAConnectionStringAreItsPasswordsAsWrittenAndAsRead() {
        #expect(Set(Redaction.conninfoSecrets("postgresql://u:p%40ss@h/d")) == ["p%40ss", "p@ss"])
        #expect(Set(Redaction.conninfoSecrets("postgresql://u:s3c%ZZret@h/d")) == ["s3c%ZZret"])
        #expect(Set(Redaction.conninfoSecrets("postgresql://u@h/d?password=a%20b")) == ["a%20b", "a b"])
        #expect(Set(Redaction.conninfoSecrets("host=h password='it\\'s' dbname=d")) == ["'it\\'s'", "it's"])
        #expect(Redaction.conninfoSecrets("host=h dbname=d").isEmpty)
        #expect(Redaction.conninfoSecrets("postgresql://u@h/d").isEmpty)
    }

    @Test(arguments: [
        ("https://user:pw@example.com/a.jpg", "https://user:***@example.com/a.jpg"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKID%2F20260101&X-Amz-Security-Token=tok&X-Amz-Signature=abc&x-id=GetObject",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Security-Token=***&X-Amz-Signature=***&x-id=GetObject"
        ),
        ("http://h/p?token=t#frag", "http://h/p?token=***#frag"),
        ("http://h:9000", "http://h:9000"),
        ("not a url", "not a url"),
    ])
    func urlsLoseTheirCredentials(text: String, shown: String) {
        #expect(Redaction.url(text) == shown)
    }
}
