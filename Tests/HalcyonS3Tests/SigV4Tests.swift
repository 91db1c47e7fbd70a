import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

@testable import HalcyonS3

/// `Tests/Fixtures/sigv4/` (sources and licences in its README.md).
private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures/sigv4")

private func text(_ url: URL) throws -> String { try String(contentsOf: url, encoding: .utf8) }

/// One case of AWS's SigV4 test suite: the raw request and its context.
private struct SuiteCase {
    var name: String
    var signer: SigV4
    var date: Date
    var expires: Int
    var signBody: Bool
    var request: SigV4.Request
    var body: Data

    init(_ name: String) throws {
        self.name = name
        let dir = fixtures.appendingPathComponent("aws-signing-test-suite/v4/\(name)")
        let context = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("context.json"))) as! [String: Any]
        let creds = context["credentials"] as! [String: Any]
        let omitToken = context["omit_session_token"] as? Bool ?? false
        signer = SigV4(
            credentials: S3Credentials(
                accessKeyID: creds["access_key_id"] as! String, secretAccessKey: creds["secret_access_key"] as! String,
                sessionToken: omitToken ? nil : creds["token"] as? String),
            region: context["region"] as! String, service: context["service"] as! String)
        signer.normalizePath = context["normalize"] as? Bool ?? true
        date = ISO8601.parse(context["timestamp"] as! String)!
        expires = context["expiration_in_seconds"] as? Int ?? 3600
        signBody = context["sign_body"] as? Bool ?? false

        // request.txt: "METHOD TARGET HTTP/1.1", headers (a line starting with a space continues
        // the previous one), a blank line, the body.
        let raw = try text(dir.appendingPathComponent("request.txt"))
        let (head, bodyText) = raw.range(of: "\n\n").map { (String(raw[..<$0.lowerBound]), String(raw[$0.upperBound...])) } ?? (raw, "")
        var lines = head.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst()
        let method = String(requestLine.prefix { $0 != " " })
        let target = String(requestLine.dropFirst(method.count + 1).dropLast(" HTTP/1.1".count))
        var headers: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            if line.first == " " || line.first == "\t" {
                headers[headers.count - 1].value += " " + line.trimmingCharacters(in: .whitespaces)
            } else if let colon = line.firstIndex(of: ":") {
                headers.append((String(line[..<colon]), String(line[line.index(after: colon)...])))
            }
        }
        let pathPart = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [(name: String, value: String)] = []
        if pathPart.count > 1 {
            for pair in pathPart[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                query.append((String(kv[0]).removingPercentEncoding!, kv.count > 1 ? String(kv[1]).removingPercentEncoding! : ""))
            }
        }
        request = SigV4.Request(method: method, path: String(pathPart[0]), query: query, headers: headers)
        body = Data(bodyText.utf8)
    }

    func expected(_ file: String) throws -> String {
        try text(fixtures.appendingPathComponent("aws-signing-test-suite/v4/\(name)/\(file)"))
    }
}

private let suiteCases: [String] = {
    let dir = fixtures.appendingPathComponent("aws-signing-test-suite/v4")
    return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).sorted()
}()

@Suite struct SigV4SuiteTests {
    @Test func theSuiteIsThere() {
        #expect(suiteCases.count == 38)
    }

    /// Every case of AWS's suite, signed with an `Authorization` header.
    @Test(arguments: suiteCases)
    func headerSigningMatchesAWSSuite(name: String) throws {
        let c = try SuiteCase(name)
        let signed = c.signer.sign(c.request, payloadHash: Digest.sha256Hex(c.body), date: c.date, contentSHA256Header: c.signBody)
        #expect(signed.canonicalRequest == (try c.expected("header-canonical-request.txt")))
        #expect(signed.stringToSign == (try c.expected("header-string-to-sign.txt")))
        #expect(signed.signature == (try c.expected("header-signature.txt")))
    }

    /// Every case of AWS's suite, presigned in the query string.
    @Test(arguments: suiteCases)
    func querySigningMatchesAWSSuite(name: String) throws {
        let c = try SuiteCase(name)
        let signed = try c.signer.presign(c.request, date: c.date, expires: c.expires, payloadHash: Digest.sha256Hex(c.body))
        #expect(signed.canonicalRequest == (try c.expected("query-canonical-request.txt")))
        #expect(signed.stringToSign == (try c.expected("query-string-to-sign.txt")))
        #expect(signed.signature == (try c.expected("query-signature.txt")))
    }
}

@Suite struct SigV4S3DocumentationTests {
    private static var doc: [String: Any] {
        let data = try! Data(contentsOf: fixtures.appendingPathComponent("s3-documentation-examples.json"))
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    private static var signer: SigV4 {
        let c = doc["credentials"] as! [String: String]
        return SigV4(credentials: S3Credentials(accessKeyID: c["access_key_id"]!, secretAccessKey: c["secret_access_key"]!), region: "us-east-1")
    }
    private static var date: Date { ISO8601.parse(doc["timestamp"] as! String)! }

    private static func pairs(_ any: Any?) -> [(name: String, value: String)] {
        (any as? [[String]] ?? []).map { ($0[0], $0[1]) }
    }

    @Test func headerExamplesMatchTheS3Documentation() throws {
        let examples = Self.doc["header_examples"] as! [[String: Any]]
        #expect(examples.count == 4)
        for e in examples {
            let request = SigV4.Request(
                method: e["method"] as! String, path: e["path"] as! String, query: Self.pairs(e["query"]), headers: Self.pairs(e["headers"]))
            var payloadHash = e["payload_hash"] as! String
            if let body = e["body"] as? String {
                #expect(Digest.sha256Hex(body) == payloadHash, "\(e["name"]!)")
                payloadHash = Digest.sha256Hex(body)
            }
            let signed = Self.signer.sign(request, payloadHash: payloadHash, date: Self.date)
            if let canonical = e["canonical_request"] as? String { #expect(signed.canonicalRequest == canonical, "\(e["name"]!)") }
            if let toSign = e["string_to_sign"] as? String { #expect(signed.stringToSign == toSign, "\(e["name"]!)") }
            #expect(signed.signature == e["signature"] as! String, "\(e["name"]!)")
            let authorization = signed.headers.first { $0.name == "Authorization" }!.value
            #expect(authorization.hasPrefix("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders="))
            #expect(authorization.hasSuffix("Signature=\(e["signature"] as! String)"))
            #expect(signed.headers.contains { $0.name == "x-amz-date" && $0.value == "20130524T000000Z" })
            #expect(signed.headers.contains { $0.name == "x-amz-content-sha256" && $0.value == payloadHash })
        }
    }

    @Test func presignedURLMatchesTheS3Documentation() throws {
        let e = Self.doc["presign_example"] as! [String: Any]
        let host = e["host"] as! String
        let request = SigV4.Request(method: "GET", path: e["path"] as! String, headers: [("host", host)])
        let signed = try Self.signer.presign(request, date: Self.date, expires: e["expires"] as! Int)
        #expect(signed.canonicalRequest == e["canonical_request"] as! String)
        #expect(signed.stringToSign == e["string_to_sign"] as! String)
        #expect(signed.signature == e["signature"] as! String)
        // The same URL through the client (virtual-hosted on AWS's legacy global endpoint).
        var config = S3Configuration(bucket: "examplebucket")
        config.endpoint = URL(string: "https://s3.amazonaws.com")
        config.credentials = Self.signer.credentials
        let url = try S3Client(configuration: config).presignedGetURL("test.txt", expires: .seconds(86400), now: Self.date)
        #expect(url.absoluteString == e["url"] as! String)
    }
}

@Suite struct SigV4EncodingTests {
    @Test func encodesKeysTheS3Way() {
        #expect(SigV4.uriEncode("photos/a b+c~d.jpg", encodeSlash: false) == "photos/a%20b%2Bc~d.jpg")
        #expect(SigV4.uriEncode("a/b", encodeSlash: true) == "a%2Fb")
        #expect(SigV4.uriEncode("ключ/日本", encodeSlash: false) == "%D0%BA%D0%BB%D1%8E%D1%87/%E6%97%A5%E6%9C%AC")
        #expect(SigV4.uriEncode("100%=&?#*!'()$,;:@", encodeSlash: true) == "100%25%3D%26%3F%23%2A%21%27%28%29%24%2C%3B%3A%40")
        #expect(SigV4.uriEncode("A-Z_a.z~0", encodeSlash: true) == "A-Z_a.z~0")
    }

    /// S3 neither normalises nor double-encodes: `a/../b` and `%41` stay as they are (encoded once).
    @Test func s3KeepsDotSegmentsAndEncodesOnce() {
        let signer = SigV4(credentials: S3Credentials(accessKeyID: "k", secretAccessKey: "s"), region: "us-east-1")
        #expect(signer.canonicalURI("/bucket/a/../b//c/./d") == "/bucket/a/../b//c/./d")
        #expect(signer.canonicalURI("/bucket/%41 b") == "/bucket/%2541%20b")
    }

    @Test func canonicalQuerySortsByEncodedNameThenValue() {
        let q = SigV4.canonicalQuery([("prefix", "a/b c"), ("list-type", "2"), ("continuation-token", "x+y="), ("b", "2"), ("b", "1")])
        #expect(q == "b=1&b=2&continuation-token=x%2By%3D&list-type=2&prefix=a%2Fb%20c")
    }

    @Test func sessionTokenIsSignedAndSent() {
        let creds = S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret", sessionToken: "token/+=")
        let signer = SigV4(credentials: creds, region: "eu-west-1")
        let signed = signer.sign(SigV4.Request(method: "GET", path: "/k", headers: [("host", "h")]), payloadHash: SigV4.unsignedPayload, date: Date())
        #expect(signed.headers.contains { $0.name == "x-amz-security-token" && $0.value == "token/+=" })
        #expect(signed.canonicalRequest.contains("x-amz-security-token:token/+=\n"))
        #expect(signed.canonicalRequest.hasSuffix("host;x-amz-content-sha256;x-amz-date;x-amz-security-token\nUNSIGNED-PAYLOAD"))
    }

    @Test func presignExpiryIsBoundedToOneSecondToSevenDays() throws {
        let signer = SigV4(credentials: S3Credentials(accessKeyID: "k", secretAccessKey: "s"), region: "us-east-1")
        let request = SigV4.Request(method: "GET", path: "/k", headers: [("host", "h")])
        for bad in [0, -1, 604_801] {
            #expect { _ = try signer.presign(request, date: Date(), expires: bad) } throws: { ($0 as? HalcyonError)?.code == .invalidOptions }
        }
        #expect(try signer.presign(request, date: Date(), expires: 1).query.contains { $0.name == "X-Amz-Expires" && $0.value == "1" })
        #expect(try signer.presign(request, date: Date(), expires: 604_800).query.contains { $0.name == "X-Amz-Expires" && $0.value == "604800" })
    }

    @Test func timestampIsUTC() {
        #expect(SigV4.timestamp(Date(timeIntervalSince1970: 1_369_353_600)) == "20130524T000000Z")
        #expect(SigV4.timestamp(Date(timeIntervalSince1970: 1_440_938_160.9)) == "20150830T123600Z")
    }
}
