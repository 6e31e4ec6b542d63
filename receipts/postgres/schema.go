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
	counts  string // the slots of the capacity: rows each accounts for (see Store.Claim)
	epoch   string // one row: the store's epoch
	count   string // the trigger function that zeroes counts and renews the epoch on TRUNCATE
	claim   string // the function Claim calls
	release string // the function Release calls
	prune   string // the function Prune calls
	settled string // index: settled receipts by when they settled
	open    string // index: unresolved receipts by lease end
	// channel is what settles and releases notify, for waiters of every process.
	channel string
	// lock is the advisory lock key that serializes schema creation.
	lock int64
}

// comment marks the table as a receipts store's, with the version of its schema.
const comment = "mcpclient request receipts, schema 2"

// slots is how many rows the capacity is split into. Claims in flight at once each hold one
// slot until they commit, so that many can share one flush of the log; more slots than the
// connections a fleet opens gain nothing.
const slots = 64

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
		claim:   with("_claim"),
		release: with("_release"),
		prune:   with("_prune"),
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
//     watched is set by a waiter, so that only the settlement or release of a receipt someone
//     waits for sends a notification.
//   - The _counts table splits the table's size into slots, so that a claim reads and keeps the
//     count without counting rows and without one row every claim must lock (see Store.Claim).
//   - The _epoch table holds the store's epoch, drawn when the schema is created and drawn anew
//     when the table is truncated: every process declares it, and it changes only when the
//     store starts empty.
//   - The _claim, _release and _prune functions are Claim, Release and Prune, each one statement
//     from the store's side.
func Schema(table string) (string, error) {
	n, err := namesOf(table)
	if err != nil {
		return "", err
	}
	return n.schema(), nil
}

func (n names) schema() string {
	return strings.NewReplacer(
		"{table}", n.table, "{counts}", n.counts, "{epoch}", n.epoch, "{count}", n.count,
		"{claim}", n.claim, "{release}", n.release, "{prune}", n.prune,
		"{settled}", n.settled, "{open}", n.open, "{comment}", comment,
		"{slots}", fmt.Sprint(slots), "{last}", fmt.Sprint(slots-1),
	).Replace(schemaTemplate)
}

// schemaTemplate is the schema, with {names} for the names of the objects.
//
// A slot's capacity, for a store of capacity max, is max/{slots}, plus one for the first
// max%{slots} slots: the capacities add up to max. A slot is held by locking its row, until the
// transaction ends. A transaction that deletes receipts holds a slot first, any one not held or
// else one it waits for, and holds nothing else while it waits; it takes the rows' locks after.
const schemaTemplate = `CREATE TABLE {table} (
	principal     text NOT NULL,
	id            text NOT NULL, -- the JSON text of the request id
	fingerprint   bytea NOT NULL,
	token         text, -- the lease's holder; NULL once settled
	response      bytea, -- the whole JSON-RPC response, once settled
	claimed_at    timestamptz NOT NULL,
	settled_at    timestamptz,
	lease_expires timestamptz NOT NULL, -- by the database's clock
	watched       boolean NOT NULL DEFAULT false, -- a waiter wants a notification
	PRIMARY KEY (principal, id)
);
CREATE INDEX {settled} ON {table} (settled_at) WHERE settled_at IS NOT NULL;
CREATE INDEX {open} ON {table} (lease_expires) WHERE settled_at IS NULL;
CREATE TABLE {counts} (
	slot int PRIMARY KEY,
	n    bigint NOT NULL -- rows inserted less rows deleted by the transactions that held it
);
INSERT INTO {counts} SELECT generate_series(0, {last}), 0;
CREATE TABLE {epoch} (
	one   boolean PRIMARY KEY DEFAULT true CHECK (one),
	epoch text NOT NULL
);
INSERT INTO {epoch} (epoch) VALUES (gen_random_uuid()::text);
CREATE FUNCTION {count}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE {counts} SET n = 0;
	UPDATE {epoch} SET epoch = gen_random_uuid()::text;
	RETURN NULL;
END $$;
CREATE TRIGGER emptied AFTER TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {count}();
CREATE FUNCTION {claim}(p_principal text, p_id text, p_fingerprint bytea, p_token text, p_ttl_us bigint, p_max bigint, p_retention_us bigint)
RETURNS TABLE (o_claimed boolean, o_fingerprint bytea, o_response bytea, o_claimed_at timestamptz, o_settled_at timestamptz, o_lease_expires timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
	per    bigint := p_max / {slots};
	extra  bigint := p_max % {slots};
	s      int;
	waited int;
	over   bigint;
	gone   bigint;
BEGIN
	LOOP
		RETURN QUERY SELECT false, fingerprint, response, claimed_at, settled_at, lease_expires
			FROM {table} WHERE principal = p_principal AND id = p_id;
		IF FOUND THEN
			RETURN;
		END IF;
		WHILE s IS NULL LOOP
			-- A slot with room that no other transaction holds. A slot whose count reached its
			-- capacity after the snapshot stays locked once the lock found it full: the search is
			-- undone unless it found one, so that this transaction holds no slot when it waits.
			BEGIN
				SELECT slot INTO s FROM {counts} WHERE n < per + (slot < extra)::int
					ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED;
				IF NOT FOUND THEN
					RAISE EXCEPTION USING ERRCODE = 'RCPT1';
				END IF;
			EXCEPTION WHEN SQLSTATE 'RCPT1' THEN
				s := NULL;
			END;
			EXIT WHEN s IS NOT NULL;
			-- Every slot with room is held: wait, holding none, until one of them is released,
			-- and look again.
			SELECT slot INTO waited FROM {counts} WHERE n < per + (slot < extra)::int ORDER BY random() LIMIT 1;
			EXIT WHEN NOT FOUND;
			BEGIN
				PERFORM FROM {counts} WHERE slot = waited FOR UPDATE;
				RAISE EXCEPTION USING ERRCODE = 'RCPT1';
			EXCEPTION WHEN SQLSTATE 'RCPT1' THEN
				NULL;
			END;
		END LOOP;
		IF s IS NULL THEN
			-- Full: make room in a slot of some capacity by deleting settled receipts past
			-- retention, oldest first, as many as the slot holds beyond one less than its
			-- capacity.
			SELECT slot INTO s FROM {counts} WHERE per + (slot < extra)::int > 0
				ORDER BY n - per - (slot < extra)::int LIMIT 1 FOR UPDATE SKIP LOCKED;
			IF NOT FOUND THEN
				SELECT slot INTO s FROM {counts} WHERE per + (slot < extra)::int > 0
					ORDER BY random() LIMIT 1 FOR UPDATE;
			END IF;
			IF NOT FOUND THEN
				RETURN; -- a capacity of 0
			END IF;
			-- Read again: a deletion may have made room since the snapshot that found none.
			SELECT GREATEST(n - per - (slot < extra)::int + 1, 0) INTO over FROM {counts} WHERE slot = s;
			DELETE FROM {table} WHERE ctid = ANY(ARRAY(
				SELECT ctid FROM {table}
				WHERE settled_at <= clock_timestamp() - p_retention_us * interval '1 microsecond'
				ORDER BY settled_at LIMIT over FOR UPDATE SKIP LOCKED));
			GET DIAGNOSTICS gone = ROW_COUNT;
			UPDATE {counts} SET n = n - gone WHERE slot = s;
			IF gone < over THEN
				RETURN; -- full of receipts unresolved or within their retention
			END IF;
		END IF;
		INSERT INTO {table} (principal, id, fingerprint, token, claimed_at, lease_expires)
			VALUES (p_principal, p_id, p_fingerprint, p_token, clock_timestamp(), clock_timestamp() + p_ttl_us * interval '1 microsecond')
			ON CONFLICT (principal, id) DO NOTHING
			RETURNING true, fingerprint, response, claimed_at, settled_at, lease_expires
			INTO o_claimed, o_fingerprint, o_response, o_claimed_at, o_settled_at, o_lease_expires;
		IF FOUND THEN
			UPDATE {counts} SET n = n + 1 WHERE slot = s;
			RETURN NEXT;
			RETURN;
		END IF;
		-- Another claim of the key committed first: the next statement's snapshot has it.
	END LOOP;
END $$;
CREATE FUNCTION {release}(p_principal text, p_id text, p_token text, p_channel text, p_topic text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	s int;
	w boolean;
BEGIN
	SELECT slot INTO s FROM {counts} ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		SELECT slot INTO s FROM {counts} WHERE slot = floor(random() * {slots})::int FOR UPDATE;
	END IF;
	DELETE FROM {table} WHERE principal = p_principal AND id = p_id AND token = p_token
		AND settled_at IS NULL AND lease_expires > clock_timestamp()
		RETURNING watched INTO w;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	UPDATE {counts} SET n = n - 1 WHERE slot = s;
	IF w THEN
		PERFORM pg_notify(p_channel, p_topic);
	END IF;
	RETURN true;
END $$;
CREATE FUNCTION {prune}(p_retention_us bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	s    int;
	gone bigint;
BEGIN
	SELECT slot INTO s FROM {counts} ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		SELECT slot INTO s FROM {counts} WHERE slot = floor(random() * {slots})::int FOR UPDATE;
	END IF;
	DELETE FROM {table} WHERE
		(settled_at IS NOT NULL AND settled_at <= clock_timestamp() - p_retention_us * interval '1 microsecond') OR
		(settled_at IS NULL AND lease_expires <= clock_timestamp() - p_retention_us * interval '1 microsecond');
	GET DIAGNOSTICS gone = ROW_COUNT;
	UPDATE {counts} SET n = n - gone WHERE slot = s;
	RETURN gone;
END $$;
COMMENT ON TABLE {table} IS '{comment}';
`

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
