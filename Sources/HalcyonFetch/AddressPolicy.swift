import Foundation

/// An IPv4 or IPv6 network, e.g. `10.0.0.0/8`, `127.0.0.1` (a /32), `fd00::/8`, `::1` (a /128).
/// The prefix length counts in the notation's own family: `::ffff:0:0/96` is every IPv4-mapped
/// address, and so every IPv4 address (`IPAddress` holds IPv4 addresses mapped).
public struct CIDR: Sendable, Equatable, CustomStringConvertible {
    /// 16 bytes; IPv4 networks are stored IPv4-mapped (`::ffff:a.b.c.d`).
    public let bytes: [UInt8]
    /// Prefix length over the 16-byte form.
    public let prefix: Int
    public let description: String

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard let first = parts.first, let address = IPAddress(first) else { return nil }
        let v6Notation = first.contains(":")
        let full = v6Notation ? 128 : 32
        let length: Int
        if parts.count == 2 {
            guard parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(parts[1]), (0...full).contains(n) else { return nil }
            length = n
        } else {
            length = full
        }
        bytes = address.bytes
        prefix = length + (v6Notation ? 0 : 96)
        description = text
    }

    public func contains(_ address: IPAddress) -> Bool {
        var remaining = prefix
        for i in 0..<16 where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if bytes[i] & mask != address.bytes[i] & mask { return false }
            remaining -= bits
        }
        return true
    }
}

/// An IP address in 16-byte form (IPv4 mapped into IPv6).
public struct IPAddress: Sendable, Equatable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(_ text: String) {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(v4: v4)
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(v6: v6)
        } else {
            return nil
        }
    }

    public init(v4: in_addr) {
        var b = [UInt8](repeating: 0, count: 16)
        b[10] = 0xFF; b[11] = 0xFF
        withUnsafeBytes(of: v4.s_addr) { for i in 0..<4 { b[12 + i] = $0[i] } }
        bytes = b
    }

    public init(v6: in6_addr) {
        bytes = withUnsafeBytes(of: v6) { Array($0) }
    }

    /// The address of a socket address (`sockaddr_in` or `sockaddr_in6`) of `length` bytes at
    /// `socketAddress`, read in place and by its own family; nil for another family or a length
    /// too short for its family. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is its IPv4
    /// address.
    public init?(socketAddress: UnsafeRawPointer, length: Int) {
        let familyOffset = MemoryLayout<sockaddr>.offset(of: \sockaddr.sa_family)!
        guard length >= familyOffset + MemoryLayout<sa_family_t>.size else { return nil }
        let family = Int32(socketAddress.loadUnaligned(fromByteOffset: familyOffset, as: sa_family_t.self))
        switch family {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            self.init(v4: socketAddress.loadUnaligned(as: sockaddr_in.self).sin_addr)
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            self.init(v6: socketAddress.loadUnaligned(as: sockaddr_in6.self).sin6_addr)
        default:
            return nil
        }
    }

    /// True for IPv4 and IPv4-mapped IPv6 (`::ffff:a.b.c.d`) addresses.
    public var isV4: Bool { bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF }

    /// `a.b.c.d` for IPv4 (and IPv4-mapped) addresses, else IPv6's compressed form (`::1`,
    /// `fd00:ec2::254`).
    public var description: String {
        if isV4 { return bytes[12..<16].map(String.init).joined(separator: ".") }
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else {
            return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":")
        }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// Which addresses downloads may connect to (the SSRF guard). Checked on the address
/// actually connected to — after DNS, for every connection, redirects included. Internal
/// ranges are refused unless an allow-list entry covers them.
public struct AddressPolicy: Sendable {
    /// Networks that are allowed even though they are internal (`--allow-network`).
    public var allowed: [CIDR]

    public init(allowed: [CIDR] = []) {
        self.allowed = allowed
    }

    /// Internal, special or non-unicast ranges refused by default, with a name for messages.
    public static let refused: [(CIDR, String)] = [
        ("0.0.0.0/8", "unspecified"), ("10.0.0.0/8", "private"), ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"), ("169.254.0.0/16", "link-local (cloud metadata)"), ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"), ("192.168.0.0/16", "private"), ("198.18.0.0/15", "benchmarking"),
        ("224.0.0.0/4", "multicast"), ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"), ("::1/128", "loopback"), ("fd00:ec2::254/128", "unique local (cloud metadata)"),
        ("fc00::/7", "unique local (private)"),
        ("fe80::/10", "link-local"), ("ff00::/8", "multicast"), ("64:ff9b::/96", "NAT64"), ("2002::/16", "6to4"),
        ("::/96", "IPv4-compatible"),
    ].map { (CIDR($0.0)!, $0.1) }

    /// Nil when `address` may be connected to, else why not.
    public func refusal(for address: IPAddress) -> String? {
        if allowed.contains(where: { $0.contains(address) }) { return nil }
        if let hit = Self.refused.first(where: { $0.0.contains(address) }) {
            return "\(address) is \(hit.1) (\(hit.0)); allow it with --allow-network"
        }
        return nil
    }
}
