import Foundation
import HalcyonQueue
import HalcyonRuntime

/// `halcyon usage`'s table: a row per queue (and fair key, and hour) of one page, then the sum
/// of the rows not printed, the total, and where the next page starts.
package enum UsageText {
    package static func render(_ report: UsageReport) -> String {
        let rows = report.rows, byFairKey = report.request.byFairKey, hourly = report.request.hourly
        var header = ["queue"]
        if byFairKey { header.append("fair key") }
        if hourly { header.append("hour (UTC)") }
        header += ["succeeded", "failed", "retried", "cpu ms", "decode", "process", "encode", "store", "fetched", "stored", "store hits"]
        func cells(_ u: Usage, label: String? = nil) -> [String] {
            var c = [label ?? u.queue]
            if byFairKey { c.append(label == nil ? (u.fairKey.isEmpty ? "(common)" : u.fairKey) : "") }
            if hourly { c.append(label == nil ? (u.hour ?? "") : "") }
            c += [
                "\(u.succeeded)", "\(u.failedOrCancelled)", "\(u.retried)", ms(u.cpuMs), ms(u.decodeCPUms), ms(u.processCPUms),
                ms(u.encodeCPUms), ms(u.storeCPUms), ByteSize.format(u.bytesFetched), ByteSize.format(u.bytesStored), "\(u.storeHits)",
            ]
            return c
        }
        let others = report.otherRows > 0 ? [cells(report.others, label: "others (\(report.otherRows) rows)")] : []
        let table = [header] + rows.map { cells($0) } + others + [cells(report.total, label: "total")]
        let widths = header.indices.map { i in table.map { $0[i].count }.max() ?? 0 }
        var out = "Usage since \(ISO8601.format(report.request.since)) (attempts ended; failed includes cancelled)\n"
        if report.totalRows == 0 { out += "  no attempts ended since then\n" }
        for (n, line) in table.enumerated() {
            let text = line.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                return i < (1 + (byFairKey ? 1 : 0) + (hourly ? 1 : 0)) ? cell + pad : pad + cell
            }
            out += "  " + text.joined(separator: "  ") + "\n"
            if n == 0 || n == table.count - 1 - others.count - 1 {
                out += "  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n"
            }
        }
        if let next = report.nextOffset {
            out += "  rows \(report.request.offset + 1)–\(next) of \(report.totalRows); the next page: --offset \(next)\n"
        }
        return out
    }

    static func ms(_ value: Double) -> String { String(format: "%.1f", value) }
}
