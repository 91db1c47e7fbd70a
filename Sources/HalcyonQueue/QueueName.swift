/// Named queues: a job's `queue` column, `halcyon work --queue`, `halcyon pause`.
public enum QueueName {
    /// The queue a job goes to when it names none.
    public static let `default` = "default"

    /// Why `name` is not a queue name (the rule of `halcyon.is_valid_queue_name`), or nil.
    public static func problem(_ name: String) -> String? {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")
        guard let first = name.first, (1...64).contains(name.utf8.count) else { return "a queue name has 1 to 64 characters" }
        guard first.isASCII, first.isLetter || first.isNumber, name.allSatisfy({ allowed.contains($0) }) else {
            return "a queue name starts with a letter or digit and has only letters, digits, '_', '.', ':' and '-' (got '\(name.prefix(80))')"
        }
        return nil
    }
}

/// Job tags: labels an application finds its jobs by (`halcyon.are_valid_tags`).
public enum JobTags {
    public static let maxCount = 32
    public static let maxBytes = 128

    /// Why `tags` cannot be a job's tags, or nil.
    public static func problem(_ tags: [String]) -> String? {
        guard tags.count <= maxCount else { return "a job has at most \(maxCount) tags (got \(tags.count))" }
        if let bad = tags.first(where: { !(1...maxBytes).contains($0.utf8.count) }) {
            return "a tag has 1 to \(maxBytes) bytes (got \(bad.utf8.count): '\(bad.prefix(40))')"
        }
        return nil
    }
}
