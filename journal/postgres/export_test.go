package postgres

import "context"

// AwaitSettles waits for the settles j is writing, for a test that reads what they wrote
// through another Journal or the table.
func AwaitSettles(j *Journal) error { return j.awaitAllSettles(context.Background()) }
