/// `/login` (template `login`): the token form (only when the dashboard has a token).
struct LoginPage {
    /// Where to go once signed in (a path on this site, `DashboardApp.localPath`).
    let next: String
    /// The last attempt sent a wrong token.
    let failed: Bool

    func render() -> String { Views.render("login", self) }
}

/// The body of an error or not-found page (template `message`).
struct MessagePage {
    let heading: String?
    let message: String
    /// Shown as an error (red).
    let error: Bool

    func render() -> String { Views.render("message", self) }
}
