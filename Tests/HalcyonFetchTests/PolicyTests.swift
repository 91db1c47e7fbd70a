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

/// The guard judges the address it is about to connect to, read from the socket address
/// libcurl hands over, for every range the docs list.
@Suite struct AddressJudgementTests {
    /// Every range the docs name, with an address in it and what the refusal says.
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1 is loopback (127.0.0.0/8)"), ("127.255.0.9", "loopback (127.0.0.0/8)"),
        ("::1", "::1 is loopback (::1/128)"),
        ("10.1.2.3", "private (10.0.0.0/8)"), ("172.16.0.1", "private (172.16.0.0/12)"), ("192.168.1.1", "private (192.168.0.0/16)"),
        ("fc00::1", "fc00::1 is unique local (private) (fc00::/7)"), ("fd12:3456::1", "unique local (private) (fc00::/7)"),
        ("169.254.169.254", "169.254.169.254 is link-local (cloud metadata) (169.254.0.0/16)"),
        ("fd00:ec2::254", "fd00:ec2::254 is unique local (cloud metadata) (fd00:ec2::254/128)"),
        ("fe80::1", "fe80::1 is link-local (fe80::/10)"), ("100.64.0.1", "carrier-grade NAT (100.64.0.0/10)"),
        ("224.0.0.1", "multicast (224.0.0.0/4)"), ("ff02::1", "multicast (ff00::/8)"), ("0.0.0.0", "unspecified (0.0.0.0/8)"),
        ("::", ":: is unspecified (::/128)"), ("240.0.0.1", "reserved (240.0.0.0/4)"), ("198.18.0.1", "benchmarking (198.18.0.0/15)"),
        ("192.0.0.8", "IETF protocol assignments (192.0.0.0/24)"),
        // IPv4-mapped: judged as the IPv4 address it maps.
        ("::ffff:127.0.0.1", "127.0.0.1 is loopback (127.0.0.0/8)"), ("::ffff:10.0.0.1", "10.0.0.1 is private (10.0.0.0/8)"),
        ("::ffff:169.254.169.254", "169.254.169.254 is link-local (cloud metadata)"),
        ("::ffff:192.168.0.1", "192.168.0.1 is private (192.168.0.0/16)"),
        // Other IPv6 forms carrying an IPv4 address: refused whatever they carry.
        ("64:ff9b::a00:1", "64:ff9b::a00:1 is NAT64 (64:ff9b::/96)"), ("64:ff9b::808:808", "NAT64 (64:ff9b::/96)"),
        ("2002:a00:1::", "2002:a00:1:: is 6to4 (2002::/16)"), ("::127.0.0.1", "IPv4-compatible (::/96)"),
        ("::808:808", "IPv4-compatible (::/96)"),
    ])
    func refusesEachDocumentedRangeNamingIt(address: String, refusal: String) throws {
        let ip = try #require(IPAddress(address))
        let why = try #require(AddressPolicy().refusal(for: ip), "\(address) was allowed")
        #expect(why.contains(refusal), "\(address): \(why)")
        // The same from a socket address, as the open-socket callback reads it.
        let (storage, length) = try #require(SocketAddresses.make(address))
        let read = withUnsafeBytes(of: storage) { IPAddress(socketAddress: $0.baseAddress!, length: length) }
        #expect(read == ip, "\(address) read as \(read.map(\.description) ?? "nothing")")
    }

    @Test func mappedAddressesAreAllowedWhereTheirIPv4AddressIs() throws {
        let policy = AddressPolicy(allowed: [try #require(CIDR("10.0.0.0/8"))])
        #expect(policy.refusal(for: IPAddress("::ffff:10.9.8.7")!) == nil)
        #expect(policy.refusal(for: IPAddress("10.9.8.7")!) == nil)
        // The other forms carrying 10.0.0.1 are not that address.
        for other in ["64:ff9b::a00:1", "::a00:1", "2002:a00:1::"] {
            #expect(policy.refusal(for: IPAddress(other)!) != nil, "\(other)")
        }
        // IPv6 notation for IPv4 networks counts its prefix over 128 bits.
        let mapped = AddressPolicy(allowed: [try #require(CIDR("::ffff:10.0.0.0/104"))])
        #expect(mapped.refusal(for: IPAddress("10.200.0.1")!) == nil)
        #expect(mapped.refusal(for: IPAddress("11.0.0.1")!) == nil)  // public anyway
        #expect(mapped.refusal(for: IPAddress("192.168.0.1")!) != nil)
        let everyIPv4 = AddressPolicy(allowed: [try #require(CIDR("::ffff:0:0/96"))])
        #expect(everyIPv4.refusal(for: IPAddress("127.0.0.1")!) == nil)
        #expect(everyIPv4.refusal(for: IPAddress("::1")!) != nil)
    }

    @Test func eachFamilysLoopbackIsItsOwnNetwork() throws {
        for text in ["::1", "::1/128"] {
            let v6 = AddressPolicy(allowed: [try #require(CIDR(text))])
            #expect(v6.refusal(for: IPAddress("::1")!) == nil, "\(text)")
            #expect(v6.refusal(for: IPAddress("127.0.0.1")!) != nil, "\(text)")
            #expect(v6.refusal(for: IPAddress("::2")!) != nil, "\(text)")
        }
        let v4 = AddressPolicy(allowed: [try #require(CIDR("127.0.0.1"))])
        #expect(v4.refusal(for: IPAddress("::1")!)?.contains("::1 is loopback") == true)
    }

    /// The callback's address is read where libcurl keeps it (a whole sockaddr_storage), by its
    /// family and length: an IPv6 address is 28 bytes, not the 16 of `struct sockaddr`.
    @Test(arguments: [
        ("::1", "::1"), ("2001:db8::1", "2001:db8::1"), ("fd00:ec2::254", "fd00:ec2::254"), ("::ffff:10.0.0.1", "10.0.0.1"),
        ("127.0.0.1", "127.0.0.1"), ("8.8.8.8", "8.8.8.8"), ("2a00:1450:4001:81c::200e", "2a00:1450:4001:81c::200e"),
    ])
    func readsSocketAddressesByFamily(address: String, shown: String) throws {
        let (storage, length) = try #require(SocketAddresses.make(address))
        let ip = try #require(withUnsafeBytes(of: storage) { IPAddress(socketAddress: $0.baseAddress!, length: length) })
        #expect(ip.description == shown)
        #expect(ip == IPAddress(address))
    }

    @Test func refusesSocketAddressesItCannotRead() throws {
        let (v6, _) = try #require(SocketAddresses.make("::1"))
        // Shorter than a sockaddr_in6: not read past its end.
        #expect(withUnsafeBytes(of: v6) { IPAddress(socketAddress: $0.baseAddress!, length: 16) } == nil)
        var unix = sockaddr_storage()
        unix.ss_family = sa_family_t(AF_UNIX)
        #expect(withUnsafeBytes(of: unix) { IPAddress(socketAddress: $0.baseAddress!, length: MemoryLayout<sockaddr_storage>.size) } == nil)
        #expect(withUnsafeBytes(of: unix) { IPAddress(socketAddress: $0.baseAddress!, length: 1) } == nil)
    }
}

/// Socket addresses as a resolver (and libcurl) produce them.
enum SocketAddresses {
    static func make(_ text: String) -> (sockaddr_storage, Int)? {
        var storage = sockaddr_storage()
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(80).bigEndian
            sin.sin_addr = v4
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin, as: sockaddr_in.self) }
            return (storage, MemoryLayout<sockaddr_in>.size)
        }
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        var sin6 = sockaddr_in6()
        sin6.sin6_family = sa_family_t(AF_INET6)
        sin6.sin6_port = UInt16(80).bigEndian
        sin6.sin6_addr = v6
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin6, as: sockaddr_in6.self) }
        return (storage, MemoryLayout<sockaddr_in6>.size)
    }
}
