import Foundation
import Mustache

/// The dashboard's pages are mustache templates (`Templates/*.mustache`, compiled into the
/// binary as `Templates.sources`), rendered from the plain values of the models in `Pages/`.
/// `{{ }}` HTML-escapes every value (`& < > " '`), so a job row's text never becomes markup;
/// the one unescaped insertion is the layout's `{{{main}}}`, a page this renderer made.
package enum Views {
    /// Every template, parsed once.
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in Templates.sources {
            do {
                try library.register(text, named: name)
            } catch {
                preconditionFailure("dashboard template \(name) does not parse: \(error)")
            }
        }
        return library
    }()

    /// Each template that does not parse, with why (none: the suite checks).
    package static func parseErrors() -> [String: String] {
        var errors: [String: String] = [:]
        for (name, text) in Templates.sources {
            do { _ = try MustacheTemplate(string: text) } catch { errors[name] = "\(error)" }
        }
        return errors
    }

    /// `model` through the template `name`.
    static func render(_ name: String, _ model: Any) -> String {
        guard let text = library.render(model, withTemplate: name) else { preconditionFailure("no dashboard template \(name)") }
        return text
    }

    /// The whole page around `main` (a rendered page body). `live` pages reload their `main`
    /// every `live` seconds (dashboard.js; nothing happens without JavaScript).
    static func layout(title: String, active: String, live: Int?, main: String) -> String {
        render(
            "layout",
            Layout(
                title: title, live: live.map { Layout.Live(seconds: $0) },
                nav: [("/", "Overview"), ("/jobs", "Jobs"), ("/usage", "Usage")].map {
                    Layout.NavLink(href: $0.0, label: $0.1, current: $0.1 == active)
                },
                main: main))
    }

    struct Layout {
        struct Live { let seconds: Int }
        struct NavLink {
            let href: String
            let label: String
            let current: Bool
        }
        let title: String
        let live: Live?
        let nav: [NavLink]
        let main: String
    }
}

/// A label and its value in a `<dl class="kv">` (template `row`): one of text, code, muted
/// text, preformatted text, lines or links; a dash when there is no value.
struct Row {
    struct Link {
        let href: String
        let text: String
    }

    // Stored, not computed: templates read values by reflection (Mirror sees stored properties).
    let label: String
    var rowText: String?
    var rowCode: String?
    var rowMuted: String?
    var rowPre: String?
    var rowLines: [String]?
    var rowLinks: [Link]?
    /// No value: the row shows a muted dash.
    let dash: Bool

    private init(
        label: String, rowText: String? = nil, rowCode: String? = nil, rowMuted: String? = nil, rowPre: String? = nil, rowLines: [String]? = nil,
        rowLinks: [Link]? = nil
    ) {
        self.label = label
        self.rowText = rowText
        self.rowCode = rowCode
        self.rowMuted = rowMuted
        self.rowPre = rowPre
        self.rowLines = rowLines
        self.rowLinks = rowLinks
        dash = rowText == nil && rowCode == nil && rowMuted == nil && rowPre == nil && rowLines == nil && rowLinks == nil
    }

    /// Text, or a dash when nil or empty.
    static func text(_ label: String, _ value: String?) -> Row {
        Row(label: label, rowText: value.flatMap { $0.isEmpty ? nil : $0 })
    }

    static func code(_ label: String, _ value: String?) -> Row {
        Row(label: label, rowCode: value.flatMap { $0.isEmpty ? nil : $0 })
    }

    static func muted(_ label: String, _ value: String) -> Row { Row(label: label, rowMuted: value) }

    static func pre(_ label: String, _ value: String?) -> Row {
        Row(label: label, rowPre: value.flatMap { $0.isEmpty ? nil : $0 })
    }

    static func lines(_ label: String, _ lines: [String]) -> Row { Row(label: label, rowLines: lines.isEmpty ? nil : lines) }

    static func links(_ label: String, _ links: [Link]) -> Row { Row(label: label, rowLinks: links.isEmpty ? nil : links) }
}

/// Text cut to a length with an ellipsis, the whole text (up to 4 KiB) in its title (template
/// `clipped`).
struct Clipped {
    let clipText: String
    let clipTitle: String?

    init(_ text: String, _ limit: Int) {
        if text.count <= limit {
            clipText = text
            clipTitle = nil
        } else {
            clipText = String(text.prefix(limit))
            clipTitle = String(text.prefix(4096))
        }
    }
}

/// A POST form with the CSRF token and one button (template `button`); `confirm` asks first
/// (with JavaScript).
struct Button {
    struct Field {
        let name: String
        let value: String
    }

    let action: String
    let label: String
    let csrf: String
    var fields: [Field] = []
    var danger = false
    var confirm: String?
}
