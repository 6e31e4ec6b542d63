package postgres

import "fmt"

// columns are those a record is read from, in scanRecord's order. A row is open while it has a
// lease, live or lapsed: a lapsed one is a holder that is gone without settling it, and that may
// have sent it.
const columns = `id, server, method, frame, fingerprint, header::text, version, idempotent, receipts_scope, ` +
	`receipts_epoch, state, attempts, created, updated, supersedes, reason, superseded_by, reached, lease_token IS NOT NULL`

// free is true of a row that no live claim holds. now() is the database's clock, the one every
// worker's leases are measured by.
const free = `(lease_token IS NULL OR lease_expires <= now())`

// unresolvedRow is mcpclient.JournalRecord.Unresolved of a row, written once for the statement
// and the partial index that must agree with it.
const unresolvedRow = `superseded_by IS NULL AND (lease_token IS NOT NULL OR state IN ('pending', 'uncertain', 'conflict'))`

// durable raises the transaction's synchronous_commit to on when the session has it off, so
// that a commit the journal promises to be durable is, whatever the role's or database's
// default. A stricter setting (remote_apply, say) is kept.
const durable = `set_config('synchronous_commit', CASE current_setting('synchronous_commit') WHEN 'off' THEN 'on' ` +
	`ELSE current_setting('synchronous_commit') END, true)`

// queries are a Journal's statements, written for its table.
type queries struct {
	fastInsert, durable, known, claimKnown, older, supersede, slotSkipLocked, slotWait, victim, lockSlot, evict, insert string
	extend, rebind, settle, forget, unresolved, lookup, prune                                                           string
}

func queriesOf(n names) queries {
	t := n.table
	insertInto := `INSERT INTO ` + t + ` (id, server, method, frame, fingerprint, header, version, idempotent, receipts_scope, ` +
		`receipts_epoch, state, supersedes, reason, lease_owner, lease_token, lease_expires, shard) `
	return queries{
		// A new request in one statement, committed durably with it: a shard with room that no
		// other claim holds, and the row. It records nothing when the id is known, or when no
		// free shard has room; the transaction of Claim sorts those out.
		fastInsert: fmt.Sprintf(`WITH slot AS (SELECT shard FROM %s WHERE held < $16::bigint + (shard < $17::int)::int `+
			`ORDER BY (shard + %d - $18) %% %[2]d LIMIT 1 FOR UPDATE SKIP LOCKED) `, n.slots, shards) + insertInto +
			`SELECT $1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9, $10, 'pending', $11, $12, $13, $14, ` +
			`now() + $15 * interval '1 millisecond', shard FROM slot WHERE ` + durable + ` IS NOT NULL ON CONFLICT (id) DO NOTHING`,
		durable: `SELECT ` + durable,
		// The row as it stands, locked until the claim commits, and whether a live claim holds it.
		known: `SELECT ` + columns + `, lease_token IS NOT NULL AND lease_expires > now() FROM ` + t + ` WHERE id = $1 FOR UPDATE`,
		// A known id keeps its state, reached and receipts: the claim only opens it under its
		// lease. An open row is not settled (see mcpclient.JournalRecord.Settled).
		claimKnown: `UPDATE ` + t + ` SET settled_at = NULL, updated = now(), lease_owner = $2, ` +
			`lease_token = $3, lease_expires = now() + $4 * interval '1 millisecond' WHERE id = $1`,
		// The older request, locked: whether another request replaced it, and which live claim
		// holds it, are what the link is conditional on.
		older: `SELECT superseded_by, CASE WHEN NOT ` + free + ` THEN lease_token END FROM ` + t + ` WHERE id = $1 FOR UPDATE`,
		// The link is set once, on a row free or held by the claim $3: the conditions are
		// checked again in the statement, which runs under the row lock older took.
		supersede: `UPDATE ` + t + ` SET superseded_by = $2, settled_at = coalesce(settled_at, now()), updated = now() ` +
			`WHERE id = $1 AND superseded_by IS NULL AND (` + free + ` OR lease_token = $3)`,
		// A shard with room, the request's own first: one that another claim holds locked is
		// passed over for one that is free, and waited for only when no free one has room.
		slotSkipLocked: fmt.Sprintf(`SELECT shard FROM %s WHERE held < $1::bigint + (shard < $2::int)::int ORDER BY (shard + %d - $3) %% %[2]d LIMIT 1 FOR UPDATE SKIP LOCKED`, n.slots, shards),
		slotWait:       fmt.Sprintf(`SELECT shard FROM %s WHERE held < $1::bigint + (shard < $2::int)::int ORDER BY (shard + %d - $3) %% %[2]d LIMIT 1 FOR UPDATE`, n.slots, shards),
		// The oldest settled request that no claim holds, other than the one being superseded,
		// which stays as the record of what was sent under its id.
		victim: `SELECT id, shard FROM ` + t + ` WHERE settled_at IS NOT NULL AND ` + free +
			` AND id IS DISTINCT FROM $1 ORDER BY settled_at LIMIT 1 FOR UPDATE SKIP LOCKED`,
		lockSlot: `SELECT shard FROM ` + n.slots + ` WHERE shard = $1 FOR UPDATE`,
		evict:    `DELETE FROM ` + t + ` WHERE id = $1`,
		insert: insertInto + `VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9, $10, 'pending', $11, $12, $13, $14, ` +
			`now() + $15 * interval '1 millisecond', $16) ON CONFLICT (id) DO NOTHING`,
		// Only while the lease is live: a lapsed lease may already be another worker's to
		// take, and reviving it could put two holders on one id.
		extend: `UPDATE ` + t + ` SET lease_expires = now() + $3 * interval '1 millisecond' ` +
			`WHERE id = $1 AND lease_token = $2 AND lease_expires > now() AND ` + durable + ` IS NOT NULL`,
		rebind: `UPDATE ` + t + ` SET receipts_scope = $3, receipts_epoch = $4, updated = now() ` +
			`WHERE id = $1 AND lease_token = $2 AND lease_expires > now() AND ` + durable + ` IS NOT NULL`,
		// Written whether or not the lease is still live, as long as no other claim took it:
		// the outcome is this claim's to record. The row it leaves is not open, so it is
		// settled (see mcpclient.JournalRecord.Settled) when replaced, or answered or failed.
		// Committed asynchronously (see the package doc).
		settle: `UPDATE ` + t + ` SET state = $3, reached = reached OR $5, attempts = attempts + $4, updated = now(), ` +
			`settled_at = CASE WHEN $3 IN ('answered', 'failed') OR superseded_by IS NOT NULL THEN coalesce(settled_at, now()) END, ` +
			`lease_owner = NULL, lease_token = NULL, lease_expires = NULL ` +
			`WHERE id = $1 AND lease_token = $2 AND set_config('synchronous_commit', 'off', true) IS NOT NULL`,
		// Both counts read the table as it was before the delete: the first says whether the
		// row was free and deleted, the second whether there was one.
		forget: `WITH gone AS (DELETE FROM ` + t + ` WHERE id = $1 AND ` + free + ` RETURNING 1) ` +
			`SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM ` + t + ` WHERE id = $1)`,
		unresolved: `SELECT ` + columns + ` FROM ` + t + ` WHERE server = $1 AND ` + unresolvedRow + ` AND ` + free +
			` ORDER BY created, id`,
		lookup: `SELECT ` + columns + ` FROM ` + t + ` WHERE id = $1`,
		prune: `WITH gone AS (DELETE FROM ` + t + ` WHERE ctid IN (SELECT ctid FROM ` + t +
			` WHERE settled_at < now() - $1 * interval '1 millisecond' AND ` + free +
			` ORDER BY settled_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM gone`,
	}
}
