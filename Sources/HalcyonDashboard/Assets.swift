/// The dashboard's stylesheet and script, served from `/assets/` (the Content-Security-Policy
/// allows no inline style or script).
enum Assets {
    static let css = """
        :root { --fg: #1d2430; --muted: #667085; --line: #e4e7ec; --bg: #f7f8fa; --card: #fff; --ok: #12a150; --bad: #d92d20;
                --run: #2e90fa; --wait: #f79009; --off: #98a2b3; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); }
        body { margin: 0; background: var(--bg); }
        header { display: flex; gap: 24px; align-items: center; padding: 10px 24px; background: #101828; color: #fff; }
        header .brand { font-weight: 700; letter-spacing: .04em; }
        header nav a { color: #d0d5dd; margin-right: 16px; text-decoration: none; }
        header nav a[aria-current] { color: #fff; border-bottom: 2px solid #fff; }
        main { padding: 16px 24px 40px; max-width: 1280px; }
        h1 { font-size: 20px; margin: 8px 0 12px; } h2 { font-size: 15px; margin: 22px 0 8px; color: #344054; }
        a { color: #175cd3; }
        .muted { color: var(--muted); } .inline { display: inline; }
        .cards { display: flex; gap: 12px; flex-wrap: wrap; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 130px; text-decoration: none; color: inherit; }
        .card .n { font-size: 22px; font-weight: 650; } .card .l { color: var(--muted); }
        table { border-collapse: collapse; background: var(--card); border: 1px solid var(--line); width: 100%; }
        th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { background: #f2f4f7; font-weight: 600; color: #475467; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; color: #fff; background: var(--off); }
        .badge.succeeded, .badge.live { background: var(--ok); } .badge.failed, .badge.dead { background: var(--bad); }
        .badge.running { background: var(--run); } .badge.queued, .badge.paused { background: var(--wait); }
        .grid { display: grid; grid-template-columns: 1fr 1fr; gap: 0 24px; } @media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
        form.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin-bottom: 12px; }
        form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
        input, select, button { font: inherit; padding: 4px 8px; border: 1px solid #d0d5dd; border-radius: 6px; background: #fff; }
        button { cursor: pointer; background: #175cd3; color: #fff; border-color: #175cd3; } button.danger { background: var(--bad); border-color: var(--bad); }
        .actions { margin: 8px 0 12px; display: flex; gap: 8px; align-items: center; }
        img.thumb { width: 48px; height: 48px; object-fit: cover; border-radius: 4px; background: #eee; display: block; }
        .rungs { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-end; }
        .rungs figure { margin: 0; }
        .rungs figcaption { font-size: 12px; color: var(--muted); }
        img.rung { max-width: 200px; max-height: 160px; border: 1px solid var(--line); display: block; }
        img.result { max-width: 100%; max-height: 480px; border: 1px solid var(--line); background: repeating-conic-gradient(#eee 0 25%, #fff 0 50%) 0 0 / 16px 16px; }
        pre { background: #f2f4f7; padding: 8px; border-radius: 6px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; margin: 0; }
        dl.kv { display: grid; grid-template-columns: 180px 1fr; gap: 4px 12px; background: var(--card); border: 1px solid var(--line); padding: 10px; margin: 0; }
        dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; word-break: break-all; }
        .notice { background: #ecfdf3; border: 1px solid #abefc6; padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; }
        .error { background: #fef3f2; border: 1px solid #fecdca; padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; }
        svg text { font: 11px system-ui, sans-serif; fill: #667085; }
        .pager { margin-top: 10px; display: flex; gap: 16px; }
        """

    static let js = """
        // Halcyon dashboard: reload the live parts of a page (its <main>) every data-live seconds
        // while the tab is visible, and ask before bulk actions. Pages work without this.
        (function () {
          document.documentElement.setAttribute('data-js', 'on');
          document.addEventListener('submit', function (e) {
            var question = e.target.getAttribute('data-confirm');
            if (question && !window.confirm(question)) e.preventDefault();
          });
          var every = Number(document.body.getAttribute('data-live') || 0);
          if (!every) return;
          var busy = false;
          setInterval(function () {
            if (document.hidden || busy) return;
            var active = document.activeElement;
            if (active && (active.tagName === 'INPUT' || active.tagName === 'SELECT')) return;
            busy = true;
            fetch(location.href, { headers: { 'X-Halcyon-Partial': '1' }, credentials: 'same-origin' })
              .then(function (r) { return r.ok ? r.text() : null; })
              .then(function (html) { if (html !== null) document.getElementById('main').innerHTML = html; })
              .catch(function () {})
              .then(function () { busy = false; });
          }, every * 1000);
        })();
        """
}
