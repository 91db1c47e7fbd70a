/// The queue's statements, typed: one `Query` per named statement of `Queries/*.sql` (the type
/// is the statement's name, capitalised), with its parameters as typed fields and its `Row`.
/// The `JobQueue` methods, the status and the overview call these.
enum SQL {}
