import Foundation

/// A small XML reader for S3's answers (ListObjectsV2, CopyObject, errors): elements, text,
/// the five predefined entities and character references, CDATA, comments and the XML
/// declaration. No DTDs (a `<!DOCTYPE` is refused, so no entity can expand), no namespaces
/// beyond dropping a `prefix:`. Bounded: callers cap the input's size; nesting is capped here.
/// (Foundation's `XMLParser` lives in FoundationXML on Linux and pulls in libxml2 for this.)
struct XMLElement: Sendable {
    var name: String
    var children: [XMLElement] = []
    var text = ""

    /// The first child named `name`.
    func child(_ name: String) -> XMLElement? { children.first { $0.name == name } }
    /// The text of the first child named `name`.
    func value(_ name: String) -> String? { child(name)?.text }
    /// Every child named `name`.
    func all(_ name: String) -> [XMLElement] { children.filter { $0.name == name } }
}

enum MiniXML {
    static let maxDepth = 32

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// The document's root element.
    static func parse(_ data: Data) throws(Malformed) -> XMLElement {
        let bytes = [UInt8](data)
        var i = 0
        var stack: [XMLElement] = []
        var root: XMLElement?
        var text = [UInt8]()

        func fail(_ why: String) -> Malformed { Malformed(description: "malformed XML at byte \(i): \(why)") }
        func starts(_ s: String) -> Bool {
            let u = Array(s.utf8)
            return i + u.count <= bytes.count && Array(bytes[i..<(i + u.count)]) == u
        }
        func skip(past end: String) throws(Malformed) {
            let u = Array(end.utf8)
            while i + u.count <= bytes.count {
                if Array(bytes[i..<(i + u.count)]) == u {
                    i += u.count
                    return
                }
                i += 1
            }
            throw fail("unterminated \(end)")
        }
        func flushText() throws(Malformed) {
            guard !text.isEmpty else { return }
            if !stack.isEmpty { stack[stack.count - 1].text += try decodeEntities(text) }
            text.removeAll(keepingCapacity: true)
        }

        while i < bytes.count {
            let b = bytes[i]
            if b != UInt8(ascii: "<") {
                text.append(b)
                i += 1
                continue
            }
            if starts("<![CDATA[") {
                i += 9
                let start = i
                try skip(past: "]]>")
                try flushText()
                if !stack.isEmpty { stack[stack.count - 1].text += String(decoding: bytes[start..<(i - 3)], as: UTF8.self) }
                continue
            }
            try flushText()
            if starts("<?") {
                try skip(past: "?>")
            } else if starts("<!--") {
                try skip(past: "-->")
            } else if starts("<!") {
                throw fail("DTDs are not accepted")
            } else if starts("</") {
                i += 2
                let start = i
                while i < bytes.count, bytes[i] != UInt8(ascii: ">") { i += 1 }
                guard i < bytes.count else { throw fail("unterminated end tag") }
                let name = localName(bytes[start..<i])
                i += 1
                guard var element = stack.popLast(), element.name == name else { throw fail("unexpected </\(name)>") }
                element.text = element.children.isEmpty ? element.text : element.text.trimmingCharacters(in: .whitespacesAndNewlines)
                if stack.isEmpty {
                    guard root == nil else { throw fail("a second root element") }
                    root = element
                } else {
                    stack[stack.count - 1].children.append(element)
                }
            } else {
                i += 1
                let start = i
                while i < bytes.count, !isSpace(bytes[i]), bytes[i] != UInt8(ascii: ">"), bytes[i] != UInt8(ascii: "/") { i += 1 }
                let name = localName(bytes[start..<i])
                guard !name.isEmpty else { throw fail("an element without a name") }
                // Attributes are skipped, minding quotes.
                var quote: UInt8? = nil
                while i < bytes.count {
                    let c = bytes[i]
                    if let q = quote {
                        if c == q { quote = nil }
                    } else if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                        quote = c
                    } else if c == UInt8(ascii: ">") {
                        break
                    }
                    i += 1
                }
                guard i < bytes.count else { throw fail("unterminated start tag") }
                let selfClosing = bytes[i - 1] == UInt8(ascii: "/")
                i += 1
                let element = XMLElement(name: name)
                if selfClosing {
                    if stack.isEmpty {
                        guard root == nil else { throw fail("a second root element") }
                        root = element
                    } else {
                        stack[stack.count - 1].children.append(element)
                    }
                } else {
                    guard stack.count < maxDepth else { throw fail("nested deeper than \(maxDepth)") }
                    stack.append(element)
                }
            }
        }
        guard stack.isEmpty else { throw fail("unclosed <\(stack.last!.name)>") }
        guard let root else { throw fail("no element") }
        return root
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    private static func localName(_ raw: ArraySlice<UInt8>) -> String {
        let name = String(decoding: raw, as: UTF8.self)
        return name.split(separator: ":").last.map(String.init) ?? name
    }

    /// `&amp;` `&lt;` `&gt;` `&quot;` `&apos;` `&#N;` `&#xH;`.
    static func decodeEntities(_ raw: [UInt8]) throws(Malformed) -> String {
        guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
        var out = [UInt8]()
        var i = 0
        while i < raw.count {
            guard raw[i] == UInt8(ascii: "&") else {
                out.append(raw[i])
                i += 1
                continue
            }
            guard let semi = raw[i...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                throw Malformed(description: "malformed XML: an unterminated entity")
            }
            let entity = String(decoding: raw[(i + 1)..<semi], as: UTF8.self)
            switch entity {
            case "amp": out.append(UInt8(ascii: "&"))
            case "lt": out.append(UInt8(ascii: "<"))
            case "gt": out.append(UInt8(ascii: ">"))
            case "quot": out.append(UInt8(ascii: "\""))
            case "apos": out.append(UInt8(ascii: "'"))
            default:
                let number: UInt32?
                if entity.hasPrefix("#x") || entity.hasPrefix("#X") {
                    number = UInt32(entity.dropFirst(2), radix: 16)
                } else if entity.hasPrefix("#") {
                    number = UInt32(entity.dropFirst(1))
                } else {
                    number = nil
                }
                guard let number, let scalar = Unicode.Scalar(number) else {
                    throw Malformed(description: "malformed XML: unknown entity &\(entity);")
                }
                out += Array(String(Character(scalar)).utf8)
            }
            i = semi + 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}
