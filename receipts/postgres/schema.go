package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// names are the quoted names of a store's objects, all derived from its table's name and kept
// in the table's schema.
type names struct {
	table   string // the receipts
	counts  string // rows inserted and deleted, kept by triggers: the table's size, cheaply
	epoch   string // one row: the store's epoch
	count   string // the trigger function that keeps counts (and renews the epoch on TRUNCATE)
	settled string // index: settled receipts by when they settled
	open    string // index: unresolved receipts by lease end
	// channel is what settles and releases notify, for waiters of every process.
	channel string
	// lock is the advisory lock key that serializes schema creation and new claims.
	lock int64
}

// comment marks the table as a receipts store's, with the version of its schema.
const comment = "mcpclient request receipts, schema 1"

func namesOf(table string) (names, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 || slices.Contains(parts, "") {
		return names{}, fmt.Errorf("receipts/postgres: table name %q: want name or schema.name", table)
	}
	with := func(suffix string) string {
		id := append(pgx.Identifier(nil), parts...)
		id[len(id)-1] += suffix
		return id.Sanitize()
	}
	last := parts[len(parts)-1]
	sum := sha256.Sum256([]byte("mcpclient receipts " + table))
	return names{
		table:   pgx.Identifier(parts).Sanitize(),
		counts:  with("_counts"),
		epoch:   with("_epoch"),
		count:   with("_count"),
		settled: pgx.Identifier{last + "_settled"}.Sanitize(),
		open:    pgx.Identifier{last + "_open"}.Sanitize(),
		channel: fmt.Sprintf("mcpclient_receipts_%x", sum[:8]),
		lock:    int64(binary.BigEndian.Uint64(sum[8:16])),
	}, nil
}

// Schema returns the statements that create a store's objects for table, for a deployment
// that applies its schema with its own migration tool (the store's user then needs no CREATE
// right: New finds the table and creates nothing).
//
//   - The table holds one row per receipt: running while settled_at is NULL and the lease has
//     not ended by the database's clock, lapsed once it has, settled once settled_at is set.
//   - The _counts table counts the rows inserted and deleted, kept by triggers, so that a claim
//     reads the table's size without counting its rows.
//   - The _epoch table holds the store's epoch, drawn when the schema is created and drawn anew
//     when the table is truncated: every process declares it, and it changes only when the
//     store starts empty.
func Schema(table string) (string, error) {
	n, err := namesOf(table)
	if err != nil {
		return "", err
	}
	return n.schema(), nil
}

func (n names) schema() string {
	return fmt.Sprintf(`CREATE TABLE %[1]s (
	principal     text NOT NULL,
	id            text NOT NULL, -- the JSON text of the request id
	fingerprint   bytea NOT NULL,
	token         text, -- the lease's holder; NULL once settled
	response      bytea, -- the whole JSON-RPC response, once settled
	claimed_at    timestamptz NOT NULL,
	settled_at    timestamptz,
	lease_expires timestamptz NOT NULL, -- by the database's clock
	PRIMARY KEY (principal, id)
);
CREATE INDEX %[5]s ON %[1]s (settled_at) WHERE settled_at IS NOT NULL;
CREATE INDEX %[6]s ON %[1]s (lease_expires) WHERE settled_at IS NULL;
CREATE TABLE %[2]s (
	deleted boolean PRIMARY KEY,
	n       bigint NOT NULL
);
INSERT INTO %[2]s VALUES (false, 0), (true, 0);
CREATE TABLE %[3]s (
	one   boolean PRIMARY KEY DEFAULT true CHECK (one),
	epoch text NOT NULL
);
INSERT INTO %[3]s (epoch) VALUES (gen_random_uuid()::text);
CREATE FUNCTION %[4]s() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	c bigint;
BEGIN
	IF TG_OP = 'INSERT' THEN
		SELECT count(*) INTO c FROM added;
		IF c > 0 THEN UPDATE %[2]s SET n = n + c WHERE NOT deleted; END IF;
	ELSIF TG_OP = 'DELETE' THEN
		SELECT count(*) INTO c FROM gone;
		IF c > 0 THEN UPDATE %[2]s SET n = n + c WHERE deleted; END IF;
	ELSE
		UPDATE %[2]s SET n = 0;
		UPDATE %[3]s SET epoch = gen_random_uuid()::text;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER counted_insert AFTER INSERT ON %[1]s REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION %[4]s();
CREATE TRIGGER counted_delete AFTER DELETE ON %[1]s REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION %[4]s();
CREATE TRIGGER emptied AFTER TRUNCATE ON %[1]s FOR EACH STATEMENT EXECUTE FUNCTION %[4]s();
COMMENT ON TABLE %[1]s IS '%[7]s';
`, n.table, n.counts, n.epoch, n.count, n.settled, n.open, comment)
}

// ErrSchema reports a table that exists but is not a receipts store's.
var ErrSchema = errors.New("receipts/postgres: schema")

// migrate creates the store's objects unless its table exists. Processes starting together take
// turns under an advisory lock, so that none sees a half-made schema and none fails on
// another's concurrent CREATE; the schema is made in one transaction, so that it exists whole
// or not at all.
func (s *Store) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.n.lock); err != nil {
			return err
		}
		var exists bool
		var got *string
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')`, s.n.table).Scan(&exists, &got); err != nil {
			return err
		}
		switch {
		case !exists:
			_, err := tx.Exec(ctx, s.n.schema())
			return err
		case got == nil || *got != comment:
			return fmt.Errorf("%w: %s exists and is not a receipts store's table", ErrSchema, s.n.table)
		}
		return nil
	})
}
