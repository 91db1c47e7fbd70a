/// `/login`: the token form (only when the dashboard has a token).
enum LoginPage {
    static func render(next: String, failed: Bool) -> String {
        var html = "<h1>Sign in</h1>"
        if failed { html += "<p class=\"error\" role=\"alert\">That is not this dashboard's token.</p>" }
        html +=
            "<form method=\"post\" action=\"/login\" class=\"filters\"><input type=\"hidden\" name=\"next\" value=\"\(HTML.escape(next))\">"
            + "<label>token<input type=\"password\" name=\"token\" autocomplete=\"current-password\" autofocus required></label>"
            + "<button type=\"submit\">Sign in</button></form>"
            + "<p class=\"muted\">The token is the one given to <code>halcyon dashboard --auth-token</code> (or HALCYON_DASHBOARD_TOKEN).</p>"
        return html
    }
}
