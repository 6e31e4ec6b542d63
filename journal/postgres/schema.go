package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// shards is the number of rows the held-count of a journal is spread over. A new request takes
// one shard's row lock until it commits, so that the count is exact without making every new
// request in the fleet wait for the one before it to commit.
const shards = 16

// names are the quoted names of a journal's objects, all derived from its table's name and kept
// in the table's schema.
type names struct {
	table   string // the requests
	slots   string // the held-count, one row per shard
	held    string // the trigger function that keeps the count
	settled string // index: settled requests by when they settled
	open    string // index: unresolved requests by server
	// openQualified is open in the table's schema, for statements that name an existing index.
	openQualified string
	lock          string // the key of the advisory lock that serializes schema changes and pruning
}

// namesOf quotes the objects of table, which may be qualified by a schema ("jobs.journal").
func namesOf(table string) (names, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 || slices.Contains(parts, "") {
		return names{}, fmt.Errorf("postgres journal: table name %q: want name or schema.name", table)
	}
	with := func(suffix string) string {
		id := append(pgx.Identifier(nil), parts...)
		id[len(id)-1] += suffix
		return id.Sanitize()
	}
	return names{table: pgx.Identifier(parts).Sanitize(), slots: with("_slots"), held: with("_held"),
		settled:       pgx.Identifier{parts[len(parts)-1] + "_settled"}.Sanitize(),
		open:          pgx.Identifier{parts[len(parts)-1] + "_unresolved"}.Sanitize(),
		openQualified: with("_unresolved"),
		lock:          "mcpclient journal " + table}, nil
}

// Schema returns the statements that create the journal's objects for table (see WithTable):
// for a deployment whose workers may not change the schema, to apply with its own migration
// tool before opening the journal WithoutMigration. A table made by an earlier version of this
// package is upgraded by Open, or, WithoutMigration, reported with ErrSchema naming the
// statements that upgrade it. The requests table holds one row per request; the _slots table
// counts them by shard, kept exact by the triggers, which is what WithCapacity bounds without
// making every new request wait for one counter.
func Schema(table string) (string, error) {
	n, err := namesOf(table)
	if err != nil {
		return "", err
	}
	return n.schema(), nil
}

func (n names) schema() string {
	return fmt.Sprintf(`CREATE TABLE %[1]s (
	id             text PRIMARY KEY, -- the request id as JSON: "7" and 7 are two ids
	server         text NOT NULL,
	method         text NOT NULL,
	frame          bytea NOT NULL, -- the exact bytes every attempt sends
	fingerprint    bytea NOT NULL,
	header         jsonb,
	version        text NOT NULL DEFAULT '',
	idempotent     boolean NOT NULL DEFAULT false,
	receipts_scope text NOT NULL DEFAULT '',
	receipts_epoch text NOT NULL DEFAULT '',
	state          text NOT NULL, -- the outcome: pending, uncertain, answered, failed, conflict
	reached        boolean NOT NULL DEFAULT false, -- a send may have reached the server
	attempts       integer NOT NULL DEFAULT 0,
	created        timestamptz NOT NULL DEFAULT now(),
	updated        timestamptz NOT NULL DEFAULT now(),
	settled_at     timestamptz, -- set while the request is settled: replaced, or closed answered or failed
	supersedes     text,
	reason         text NOT NULL DEFAULT '',
	superseded_by  text,
	lease_owner    text, -- the worker holding the request's claim, for people to read
	lease_token    text, -- the claim holding it; NULL once released: the request is open until then
	lease_expires  timestamptz, -- by the database's clock
	shard          smallint NOT NULL
) WITH (fillfactor = 80); -- room on the page for the lease renewals' updates
CREATE INDEX %[5]s ON %[1]s (settled_at) WHERE settled_at IS NOT NULL;
%[6]s;
CREATE TABLE %[2]s (
	shard smallint PRIMARY KEY,
	held  bigint NOT NULL
);
INSERT INTO %[2]s SELECT s, 0 FROM generate_series(0, %[4]d) s;
CREATE FUNCTION %[3]s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		UPDATE %[2]s s SET held = s.held + n.c FROM (SELECT shard, count(*) c FROM added GROUP BY shard) n WHERE s.shard = n.shard;
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE %[2]s s SET held = s.held - n.c FROM (SELECT shard, count(*) c FROM gone GROUP BY shard) n WHERE s.shard = n.shard;
	ELSE
		UPDATE %[2]s SET held = 0;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER added AFTER INSERT ON %[1]s REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION %[3]s();
CREATE TRIGGER gone AFTER DELETE ON %[1]s REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION %[3]s();
CREATE TRIGGER emptied AFTER TRUNCATE ON %[1]s FOR EACH STATEMENT EXECUTE FUNCTION %[3]s();
%[7]s;
`, n.table, n.slots, n.held, shards-1, n.settled, n.unresolvedIndex(), n.comment())
}

// schemaVersion is the version of the journal's objects that Schema creates, recorded in the
// table's comment, by which Open tells a table to upgrade. Version 1 has no reached column, and
// its unresolved index leaves out the open requests that are answered or failed.
const schemaVersion = 2

func (n names) comment() string {
	return fmt.Sprintf(`COMMENT ON TABLE %s IS 'mcpclient request journal, schema %d'`, n.table, schemaVersion)
}

func (n names) unresolvedIndex() string {
	return `CREATE INDEX ` + n.open + ` ON ` + n.table + ` (server, created) WHERE ` + unresolvedRow
}

// upgrade brings the objects of a journal of schema 1 to the current schema.
func (n names) upgrade() string {
	return `ALTER TABLE ` + n.table + ` ADD COLUMN IF NOT EXISTS reached boolean NOT NULL DEFAULT false;
DROP INDEX IF EXISTS ` + n.openQualified + `;
` + n.unresolvedIndex() + `;
` + n.comment() + `;
`
}

// ErrSchema reports a table that is not a journal's, or a journal whose table does not exist
// and was not to be created (WithoutMigration).
var ErrSchema = errors.New("postgres journal: schema")

// migrate creates the journal's objects unless its table exists, and upgrades those of a table
// of schema 1. Workers starting together take turns under an advisory lock, so that none sees a
// half-made schema and none fails on another's concurrent CREATE.
func (j *Journal) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, j.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, j.n.lock); err != nil {
			return err
		}
		var exists bool
		var comment *string
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')`, j.n.table).Scan(&exists, &comment); err != nil {
			return err
		}
		var err error
		switch {
		case !exists:
			_, err = tx.Exec(ctx, j.n.schema())
		case comment != nil && *comment == "mcpclient request journal, schema 1":
			_, err = tx.Exec(ctx, j.n.upgrade())
		}
		return err
	})
}

// check fails with ErrSchema unless the table and its counts read as a journal's, so that a
// WithTable naming some other table is found out at Open rather than at the first request.
func (j *Journal) check(ctx context.Context) error {
	var n int
	_, err := j.pool.Exec(ctx, `SELECT `+columns+`, shard FROM `+j.n.table+` LIMIT 0`)
	if err == nil {
		err = j.pool.QueryRow(ctx, `SELECT count(*) FROM `+j.n.slots).Scan(&n)
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42703" && pgErr.Message == `column "reached" does not exist`:
		return fmt.Errorf("%w: %s is a journal of schema 1, which WithoutMigration leaves as it is; upgrade it with: %s", ErrSchema, j.n.table, j.n.upgrade())
	case errors.As(err, &pgErr):
		return fmt.Errorf("%w: %s is not a journal's table, or WithoutMigration was given and it does not exist: %v", ErrSchema, j.n.table, err)
	case err != nil:
		return fmt.Errorf("postgres journal: %w", err)
	case n != shards:
		return fmt.Errorf("%w: %s has %d shards, want %d", ErrSchema, j.n.slots, n, shards)
	}
	return nil
}
