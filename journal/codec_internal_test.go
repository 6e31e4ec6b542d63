package journal

import (
	"bytes"
	"net/http"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// everyFieldSet is a record with each of its fields set to something other than its zero value.
// A field of a type it does not know fails the test: the binary values must learn it first.
func everyFieldSet(t testing.TB) mcpclient.JournalRecord {
	var rec mcpclient.JournalRecord
	v := reflect.ValueOf(&rec).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Interface().(type) {
		case mcpclient.ID:
			f.Set(reflect.ValueOf(mcpclient.StringID("id of " + name)))
		case string:
			f.SetString("the " + name)
		case []byte:
			f.SetBytes([]byte(`{"field":"` + name + `"}`))
		case mcpclient.Fingerprint:
			var fp mcpclient.Fingerprint
			for j := range fp {
				fp[j] = byte(i + j)
			}
			f.Set(reflect.ValueOf(fp))
		case http.Header:
			f.Set(reflect.ValueOf(http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {name, "again"}}))
		case bool:
			f.SetBool(true)
		case int:
			f.SetInt(int64(3 + i))
		case mcpclient.State:
			f.Set(reflect.ValueOf(mcpclient.StateConflict))
		case mcpclient.ReceiptBinding:
			f.Set(reflect.ValueOf(mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "epoch of " + name}))
		case time.Time:
			f.Set(reflect.ValueOf(time.Date(2026, 12, 2, 10, i, 5, 123456789, time.FixedZone("", 5*3600+1800))))
		default:
			t.Fatalf("JournalRecord.%s is a %s, which the journal's binary values do not write", name, f.Type())
		}
	}
	return rec
}

// standingOf is how rec stands.
func standingOf(rec *mcpclient.JournalRecord, settledAt int64) standing {
	return standing{State: rec.State, Reached: rec.Reached, Open: rec.Open, Attempts: rec.Attempts, Receipts: rec.Receipts,
		Updated: rec.Updated, SupersededBy: rec.SupersededBy, SettledAt: settledAt}
}

// Every field of a record survives its binary values: the frozen part and how it stands.
func TestBinaryValuesKeepEveryField(t *testing.T) {
	rec := everyFieldSet(t)
	var got mcpclient.JournalRecord
	if err := decodeFrozen(appendFrozen(nil, &rec), &got); err != nil {
		t.Fatal(err)
	}
	st := standingOf(&rec, 1234567890)
	var gotSt standing
	if err := decodeStanding(appendStanding(nil, &st), &gotSt); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotSt, st) {
		t.Fatalf("standing %+v, want %+v", gotSt, st)
	}
	gotSt.into(&got)
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("record\n%+v\nwant\n%+v", got, rec)
	}
}

// A time is read back as its RFC 3339 text was by earlier versions: in UTC at offset zero, in the
// local zone when the offset is the local one, else at a fixed offset; the zero time stays zero.
func TestBinaryTimes(t *testing.T) {
	now := time.Now()
	for _, tm := range []time.Time{{}, now, now.UTC(), now.In(time.FixedZone("X", -7*3600)), time.Unix(-1, 999_999_999)} {
		st := standing{Updated: tm}
		var got standing
		if err := decodeStanding(appendStanding(nil, &st), &got); err != nil {
			t.Fatal(err)
		}
		text, _ := tm.MarshalText()
		var want time.Time
		if err := want.UnmarshalText(text); err != nil {
			t.Fatal(err)
		}
		if !got.Updated.Equal(want) || got.Updated.Location().String() != want.Location().String() || got.Updated.IsZero() != tm.IsZero() {
			t.Errorf("%v read back as %v (%s), want %v (%s)", tm, got.Updated, got.Updated.Location(), want, want.Location())
		}
	}
}

// A value cut short or carrying bytes past its end is corrupt, never a record with fields
// missing.
func TestBinaryValueCutShortIsCorrupt(t *testing.T) {
	rec := everyFieldSet(t)
	full := appendFrozen(nil, &rec)
	for n := 1; n < len(full); n++ {
		var got mcpclient.JournalRecord
		if err := decodeFrozen(full[:n], &got); err == nil {
			t.Fatalf("%d of %d bytes decoded", n, len(full))
		}
	}
	st := standingOf(&rec, 1)
	fullSt := appendStanding(nil, &st)
	for n := 1; n < len(fullSt); n++ {
		var got standing
		if err := decodeStanding(fullSt[:n], &got); err == nil {
			t.Fatalf("standing: %d of %d bytes decoded", n, len(fullSt))
		}
	}
	var got mcpclient.JournalRecord
	if err := decodeFrozen(append(full, 0), &got); err == nil {
		t.Fatal("a value with a trailing byte decoded")
	}
}

// Whatever bytes a value holds, reading it fails or gives a record that writes back the same.
func FuzzDecodeFrozen(f *testing.F) {
	rec := everyFieldSet(f)
	f.Add(appendFrozen(nil, &rec))
	f.Add(appendFrozen(nil, &mcpclient.JournalRecord{}))
	f.Add([]byte(`{"id":"a","frame":"e30="}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got mcpclient.JournalRecord
		if decodeFrozen(raw, &got) != nil || len(raw) == 0 || raw[0] != binaryFormat {
			return
		}
		var again mcpclient.JournalRecord
		if err := decodeFrozen(appendFrozen(nil, &got), &again); err != nil || !bytes.Equal(appendFrozen(nil, &again), appendFrozen(nil, &got)) {
			t.Fatalf("%x decoded to %+v, which does not write back alike (%v)", raw, got, err)
		}
	})
}

// A frozen record is written into a buffer sized for it at once, not grown step by step, each
// step a copy of what it holds so far.
func TestAppendFrozenAllocatesItsBufferOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations are not the program's")
	}
	rec := everyFieldSet(t)
	rec.Frame = bytes.Repeat([]byte("x"), 1<<10)
	size := len(appendFrozen(nil, &rec))
	var before, after runtime.MemStats
	const runs = 100
	runtime.ReadMemStats(&before)
	for range runs {
		appendFrozen(nil, &rec)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > uint64(size)*3/2 {
		t.Fatalf("%d bytes allocated to write a record of %d bytes", per, size)
	}
}
