import Foundation
import HalcyonDomain
import HalcyonRuntime
import Testing

@testable import HalcyonFetch

@Suite struct AddressPolicyTests {
    @Test(arguments: [
        "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1", "127.0.0.1",
        "127.255.0.9", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1",
        "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::a00:1",
        "2002:a00:1::",
    ])
    func refusesInternalAddressesByDefault(address: String) throws {
        let ip = try #require(IPAddress(address))
        #expect(AddressPolicy().refusal(for: ip) != nil, "\(address)")
    }

    @Test(arguments: ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2001:4860:4860::8888", "2a00:1450::1"])
    func allowsPublicAddresses(address: String) throws {
        #expect(AddressPolicy().refusal(for: try #require(IPAddress(address))) == nil, "\(address)")
    }

    @Test func allowListOpensExactlyWhatItNames() throws {
        let policy = AddressPolicy(allowed: [try #require(CIDR("127.0.0.1/32")), try #require(CIDR("10.1.0.0/16"))])
        #expect(policy.refusal(for: IPAddress("127.0.0.1")!) == nil)
        #expect(policy.refusal(for: IPAddress("::ffff:127.0.0.1")!) == nil)
        #expect(policy.refusal(for: IPAddress("127.0.0.2")!) != nil)
        #expect(policy.refusal(for: IPAddress("10.1.200.3")!) == nil)
        #expect(policy.refusal(for: IPAddress("10.2.0.1")!) != nil)
        #expect(policy.refusal(for: IPAddress("169.254.169.254")!)?.contains("metadata") == true)
    }

    @Test func cidrParsing() {
        #expect(CIDR("10.0.0.0/8") != nil)
        #expect(CIDR("fd00::/8") != nil)
        #expect(CIDR("1.2.3.4") != nil)
        for bad in ["10.0.0.0/33", "fd00::/129", "300.1.1.1", "example.com", "", "10.0.0.0/x"] {
            #expect(CIDR(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct RetryStrategyTests {
    let transient = HalcyonError(.httpStatus, "HTTP 503", permanent: false)

    @Test func intervalsGrowAsConfigured() {
        let fixed = DelayRetryStrategy(maxRetries: 3, interval: .fixed(2))
        #expect([1, 2, 3].map { fixed.delay(beforeRetry: $0, after: transient, random: 0) } == [2, 2, 2])
        let accumulated = DelayRetryStrategy(maxRetries: 3, interval: .accumulated(2))
        #expect([1, 2, 3].map { accumulated.delay(beforeRetry: $0, after: transient, random: 0) } == [2, 4, 6])
        let exponential = DelayRetryStrategy(maxRetries: 3, interval: .exponential(1), jitter: 0.5)
        #expect([1, 2, 3].map { exponential.delay(beforeRetry: $0, after: transient, random: 0) } == [1, 2, 4])
        #expect(exponential.delay(beforeRetry: 3, after: transient, random: 1) == 2)  // jitter only shortens
    }

    @Test func givesUpAfterMaxRetriesAndOnPermanentErrors() {
        let s = DelayRetryStrategy(maxRetries: 2, interval: .fixed(1))
        #expect(s.delay(beforeRetry: 3, after: transient) == nil)
        for code in [ErrorCode.notImage, .blockedAddress, .tooLarge, .tooManyRedirects] {
            #expect(s.delay(beforeRetry: 1, after: HalcyonError(code, "x")) == nil, "\(code)")
        }
        #expect(s.delay(beforeRetry: 1, after: HalcyonError(.httpStatus, "HTTP 404", permanent: true)) == nil)
        #expect(s.delay(beforeRetry: 1, after: HalcyonError(.timeout, "t")) == 1)
        #expect(s.delay(beforeRetry: 1, after: HalcyonError(.connection, "reset")) == 1)
    }

    @Test func retryAfterWinsWhenLongerUpToTheCap() {
        let s = DelayRetryStrategy(maxRetries: 2, interval: .fixed(1), retryAfterCap: 30)
        var e = transient
        e.retryAfter = 5
        #expect(s.delay(beforeRetry: 1, after: e) == 5)
        e.retryAfter = 3600
        #expect(s.delay(beforeRetry: 1, after: e) == 30)
        e.retryAfter = 0.1
        #expect(s.delay(beforeRetry: 1, after: e) == 1)
    }

    @Test func jobOptionsBuildTheStrategy() {
        let s = DelayRetryStrategy(RetryOptions(max: 4, interval: 3, backoff: .accumulated))
        #expect(s.maxRetries == 4 && s.interval == .accumulated(3))
    }

    @Test func retryAfterHeaderForms() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT
        #expect(RetryAfter.seconds("120", now: now) == 120)
        #expect(RetryAfter.seconds("Tue, 14 Nov 2023 22:13:50 GMT", now: now) == 30)
        #expect(RetryAfter.seconds("Tue, 14 Nov 2023 22:00:00 GMT", now: now) == 0)
        #expect(RetryAfter.seconds("soon", now: now) == nil)
    }
}

@Suite struct HeaderOptionTests {
    @Test(arguments: [
        #"{"headers": {"Host": "evil"}}"#, #"{"headers": {"Connection": "close"}}"#,
        #"{"headers": {"Transfer-Encoding": "chunked"}}"#, #"{"headers": {"X-A": "1\r\nX-B: 2"}}"#,
        #"{"headers": {"Bad Name": "1"}}"#, #"{"headers": {"": "1"}}"#,
    ])
    func refusesHopByHopAndInjectedHeaders(json: String) {
        #expect { _ = try JobOptions.parse(json: json) } throws: { ($0 as? HalcyonError)?.code == .invalidOptions }
    }

    @Test func acceptsOrdinaryHeaders() throws {
        let o = try JobOptions.parse(json: #"{"headers": {"Authorization": "Bearer x", "X-Trace": "abc"}}"#)
        #expect(o.headers["Authorization"] == "Bearer x")
    }

    @Test func byteSizes() {
        #expect(ByteSize.parse("512") == 512)
        #expect(ByteSize.parse("64KiB") == 65536)
        #expect(ByteSize.parse("50MiB") == 52_428_800)
        #expect(ByteSize.parse("1GB") == 1_000_000_000)
        #expect(ByteSize.parse("lots") == nil)
        #expect(ByteSize.parse("-1") == nil)
    }
}
