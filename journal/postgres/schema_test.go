package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// schemaV1 is what Schema returned for table before the reached column: the table made by an
// earlier version of the package.
func schemaV1(t *testing.T, table string) string {
	t.Helper()
	s, err := postgres.Schema(table)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{
		{"\treached        boolean NOT NULL DEFAULT false, -- a send may have reached the server\n", ""},
		{"WHERE superseded_by IS NULL AND (lease_token IS NOT NULL OR state IN ('pending', 'uncertain', 'conflict'))",
			"WHERE state IN ('pending', 'uncertain', 'conflict') AND superseded_by IS NULL"},
		{"schema 2", "schema 1"},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("Schema has no %q", r[0])
		}
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// A table of schema 1 is upgraded by Open, its rows kept; WithoutMigration refuses it, naming the
// statements that upgrade it. The upgraded table's index is the one Schema creates.
func TestSchemaUpgrade(t *testing.T) {
	old, fresh := newTable(t), newTable(t)
	execSQL(t, schemaV1(t, old))
	rec := record("a", "1")
	execSQL(t, "INSERT INTO "+old+" (id, server, method, frame, fingerprint, state, attempts, lease_token, lease_expires, shard) "+
		"VALUES ($1, 'srv', 'tools/call', $2, $3, 'pending', 1, 'gone', now() - interval '1 second', 0)", rec.ID.JSON(), rec.Frame, rec.Fingerprint[:])
	ctx := context.Background()
	_, err := postgres.Connect(ctx, dbURL, postgres.WithTable(old), postgres.WithoutMigration())
	if !errors.Is(err, postgres.ErrSchema) || !strings.Contains(err.Error(), "ADD COLUMN IF NOT EXISTS reached") {
		t.Fatalf("WithoutMigration on schema 1: %v, want ErrSchema with the upgrade", err)
	}
	j := open(t, old)
	open(t, fresh)
	got, ok := lookup(t, j, "a")
	if !ok || got.State != mcpclient.StatePending || !got.Open || got.Reached || got.Attempts != 1 {
		t.Fatalf("the row of schema 1: %+v, %v", got, ok)
	}
	if ids := unresolved(t, j, "srv"); len(ids) != 1 {
		t.Fatalf("unresolved %v after the upgrade", ids)
	}
	pool := newPool(t)
	var comment string
	if err := pool.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", old).Scan(&comment); err != nil || comment != "mcpclient request journal, schema 2" {
		t.Fatalf("comment %q, %v", comment, err)
	}
	index := func(table string) string {
		var def string
		if err := pool.QueryRow(ctx, "SELECT pg_get_indexdef(to_regclass($1))", table+"_unresolved").Scan(&def); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(def, table, "T")
	}
	if a, b := index(old), index(fresh); a != b {
		t.Fatalf("upgraded index %s, want %s", a, b)
	}
	// Open again finds it current and changes nothing.
	open(t, old)
}
